"""Memories in the admin. An admin's edit goes through the services, recorded as actor admin."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from infra.admin import ReadOnlyAdmin
from infra.llm import Embedding, LLMError
from memory.drafts import MemoryDraft
from memory.embeddings import embed_memory
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

    def changeform_view(
        self, request: HttpRequest, object_id: str | None = None, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        # The admin saves inside a transaction of its own; the embedding model is asked
        # first, outside it, so no transaction waits on the network.
        if request.method == "POST":
            try:
                request.memory_embedding = embed_memory(  # type: ignore[attr-defined]
                    summary=request.POST.get("summary", ""), content=request.POST.get("content", "")
                )
            except LLMError as error:
                self.message_user(
                    request,
                    f"Not saved: the embedding model could not be reached ({error}). Try again.",
                    messages.ERROR,
                )
                return HttpResponseRedirect(request.get_full_path())
        return super().changeform_view(request, object_id, form_url, extra_context)

    def save_model(self, request: HttpRequest, obj: Memory, form: Any, change: bool) -> None:
        embedding: Embedding | None = getattr(request, "memory_embedding", None)
        outcome = memory_save(
            user=obj.user,
            draft=MemoryDraft.of(obj),
            source=obj.source,
            actor=MemoryEvent.Actor.ADMIN,
            reason=f"edited in the admin by {request.user}",
            embedding=embedding,
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
