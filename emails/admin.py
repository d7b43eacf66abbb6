"""The email ledger and preferences in the admin: read-only, since every row is written
by the planner and the send task (an edit by hand could send an email twice or never)."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from emails.models import Email, EmailPreference
from infra.admin import ReadOnlyAdmin
from memory.admin_privacy import PrivateTextAdmin


@admin.register(Email)
class EmailAdmin(ReadOnlyAdmin, PrivateTextAdmin):
    # The list never shows what an email said: its text is the person's, opened one at a time.
    list_display = ["user", "kind", "period_key", "status", "attempts", "created_at", "sent_at"]
    list_filter = ["status", "kind"]
    search_fields = ["user__email"]
    list_select_related = ["user"]
    date_hierarchy = "created_at"
    ordering = ["-created_at", "-pk"]
    fields = [
        "user",
        "kind",
        "period_key",
        "status",
        "error",
        "memory",
        "session",
        "send_after",
        "claimed_at",
        "attempts",
        "provider_message_id",
        "embedding_model",
        "created_at",
        "sent_at",
        "subject",
        "body_text",
    ]
    private_fields = ("subject", "body_text")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Email]:
        # The list decrypts nothing and loads no vectors.
        return super().get_queryset(request).defer("embedding", "subject", "body_text", "body_html")


@admin.register(EmailPreference)
class EmailPreferenceAdmin(ReadOnlyAdmin):
    list_display = [
        "user",
        "frequency",
        "session_summaries",
        "quiet_start",
        "quiet_end",
        "unsubscribed_at",
    ]
    list_filter = ["frequency", "session_summaries", ("unsubscribed_at", admin.EmptyFieldListFilter)]
    search_fields = ["user__email"]
    list_select_related = ["user"]
