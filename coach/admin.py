"""Sessions and messages in the admin: who and when, never what was said in the lists."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest

from coach.models import ChatSession


@admin.register(ChatSession)
class ChatSessionAdmin(admin.ModelAdmin):
    list_display = ["pk", "user", "created_at", "updated_at", "ended_at", "message_count"]
    list_filter = ["ended_at"]
    search_fields = ["user__email"]
    list_select_related = ["user"]
    fields = ["user", "created_at", "updated_at", "ended_at"]
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[ChatSession]:
        return super().get_queryset(request).annotate(message_total=Count("messages"))

    @admin.display(description="messages", ordering="message_total")
    def message_count(self, session: ChatSession) -> int:
        return session.message_total
