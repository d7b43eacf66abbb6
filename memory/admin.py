"""Memories in the admin. An admin's edit goes through the services, recorded as actor admin."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from infra.admin import ReadOnlyAdmin
from memory.drafts import MemoryDraft
from memory.models import Memory, MemoryEvent, MemoryProposal
from memory.services import memory_delete, memory_save


class ProtectedFilter(admin.SimpleListFilter):
    title = "protected"
    parameter_name = "protected"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Protected"), ("no", "Unprotected")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Memory]) -> QuerySet[Memory]:
        if self.value() == "yes":
            return queryset.protected()
        if self.value() == "no":
            return queryset.unprotected()
        return queryset


@admin.register(Memory)
class MemoryAdmin(admin.ModelAdmin):
    # No key and no text in the lists: keys say as much as the notes (DESIGN.md section 8).
    list_display = ["pk", "user", "tier", "category", "source", "protected", "updated_at"]
    list_filter = ["tier", "category", "source", ProtectedFilter]
    search_fields = ["user__email"]
    list_select_related = ["user"]
    raw_id_fields = ["user"]
    fields = ["user", "key", "tier", "category", "source", "summary", "content", "due_at", "status"]
    readonly_fields = ["embedding_model", "version", "created_at", "updated_at"]

    @admin.display(boolean=True)
    def protected(self, memory: Memory) -> bool:
        return memory.is_protected

    def get_readonly_fields(self, request: HttpRequest, obj: Memory | None = None) -> list[str]:
        # A memory's owner and name are fixed once it exists.
        return [*self.readonly_fields, *(["user", "key", "source"] if obj else [])]

    def save_model(self, request: HttpRequest, obj: Memory, form: Any, change: bool) -> None:
        outcome = memory_save(
            user=obj.user,
            draft=MemoryDraft.of(obj),
            source=obj.source,
            actor=MemoryEvent.Actor.ADMIN,
            reason=f"edited in the admin by {request.user}",
        )
        obj.pk, obj.version = outcome.memory.pk, outcome.memory.version

    def delete_model(self, request: HttpRequest, obj: Memory) -> None:
        memory_delete(
            user=obj.user, memory_id=obj.pk, actor=MemoryEvent.Actor.ADMIN, reason=f"deleted by {request.user}"
        )

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Memory]) -> None:
        for memory in queryset.select_related("user"):
            self.delete_model(request, memory)


@admin.register(MemoryEvent)
class MemoryEventAdmin(ReadOnlyAdmin):
    # Append-only: history is read here, never written.
    list_display = ["created_at", "user", "memory_id", "actor", "action"]
    list_filter = ["action", "actor"]
    search_fields = ["user__email", "=memory_id"]
    list_select_related = ["user"]


@admin.register(MemoryProposal)
class MemoryProposalAdmin(admin.ModelAdmin):
    list_display = ["created_at", "user", "memory", "kind", "status", "decided_at"]
    list_filter = ["status", "kind"]
    search_fields = ["user__email", "=memory__id"]
    list_select_related = ["user", "memory"]
    readonly_fields = ["user", "memory", "kind", "proposed", "reason", "base_version", "status", "decided_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
