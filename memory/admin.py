"""Memories in the admin. An admin's edit goes through the services, recorded as actor admin.

A protected memory (the person's own, or about their safety) is never changed by staff in
place: saving a change to it becomes a suggestion the person confirms on their memory
page, like the coach's, and staff cannot delete it (DESIGN.md section 8)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from infra.admin import FieldGroups, ReadOnlyAdmin, SupportSearch
from infra.llm import Embedding, LLMError
from memory.admin_privacy import PrivateTextAdmin
from memory.drafts import MemoryDraft, MemoryIsProtected
from memory.embeddings import embed_memory
from memory.models import Memory, MemoryEvent, MemoryProposal, MemoryQuerySet, PrivateTextViewing, Source
from memory.proposals import proposal_make
from memory.services import memory_delete, memory_save
from memory.staff_audit import AUDIT_VERB, StaffActionAudit

SUGGESTED = (
    "This memory is protected, so it was not changed: the change was sent to the person as a "
    "suggestion, to confirm or turn down on their memory page."
)


class ProtectedFilter(admin.SimpleListFilter):
    title = "protected"
    parameter_name = "protected"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Protected"), ("no", "Unprotected")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Memory]) -> QuerySet[Memory]:
        # MemoryAdmin's rows come from Memory.objects, a MemoryQuerySet.
        assert isinstance(queryset, MemoryQuerySet)
        if self.value() == "yes":
            return queryset.protected()
        if self.value() == "no":
            return queryset.unprotected()
        return queryset


class WrittenByFilter(admin.SimpleListFilter):
    # Source's own labels speak to the person ("you", "your coach"); staff read these.
    title = "written by"
    parameter_name = "source"
    WORDING: dict[str, str] = {
        Source.USER: "the person",
        Source.ONBOARDING: "the person, at onboarding",
        Source.MANUAL: "the person (edited or kept)",
        Source.COACH: "the coach",
        Source.ADMIN: "support staff",
    }

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return list(self.WORDING.items())

    def queryset(self, request: HttpRequest, queryset: QuerySet[Memory]) -> QuerySet[Memory]:
        return queryset.filter(source=self.value()) if self.value() in self.WORDING else queryset


@admin.register(Memory)
class MemoryAdmin(SupportSearch[Memory], StaffActionAudit, PrivateTextAdmin[Memory]):
    # No key and no text in the lists: keys say as much as the notes (DESIGN.md section 8).
    list_display = ["pk", "user", "tier", "category", "written_by", "protected", "updated_at"]
    list_filter = ["tier", "category", WrittenByFilter, ProtectedFilter]
    search_fields = ["user__email"]
    list_select_related = ["user"]
    raw_id_fields = ["user"]
    fields = ["user", "key", "tier", "category", "summary", "content", "due_at", "status"]
    private_fields = ("key", "summary", "content")

    @admin.display(boolean=True)
    def protected(self, memory: Memory) -> bool:
        return memory.is_protected

    @admin.display(description="written by", ordering="source")
    def written_by(self, memory: Memory) -> str:
        return WrittenByFilter.WORDING.get(memory.source, memory.source)

    def get_fields(self, request: HttpRequest, obj: Memory | None = None) -> FieldGroups:
        # What staff write is never the person's: its source is shown, never chosen.
        return [*super().get_fields(request, obj), *(["source"] if obj else [])]

    def get_readonly_fields(self, request: HttpRequest, obj: Memory | None = None) -> list[str]:
        # A memory's owner, name and source are fixed once it exists.
        return [
            *super().get_readonly_fields(request, obj),
            "embedding_model",
            "version",
            "created_at",
            "updated_at",
        ] + ([f for f in ("user", "key", "source") if f in self.get_fields(request, obj)] if obj else [])

    def changeform_view(
        self, request: HttpRequest, object_id: str | None = None, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        # The admin saves inside a transaction of its own; the embedding model is asked
        # first, outside it, so no transaction waits on the network.
        if request.method == "POST":
            try:
                # Handed to save_model on the request, which the admin passes it; HttpRequest
                # declares no such attribute.
                request.memory_embedding = self._embedding_for(request, object_id)  # type: ignore[attr-defined]
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
        draft = MemoryDraft.of(obj)
        try:
            outcome = memory_save(
                user=obj.user,
                draft=draft,
                source=Source.ADMIN,
                actor=MemoryEvent.Actor.ADMIN,
                reason=f"edited in the admin by {request.user}",
                embedding=embedding,
            )
        except MemoryIsProtected:
            stored = Memory.objects.get(user=obj.user, pk=obj.pk)
            if draft == MemoryDraft.of(stored):
                return
            proposal_make(
                user=obj.user,
                memory=stored,
                kind=MemoryProposal.Kind.UPDATE,
                draft=draft,
                reason="Our support team suggested this change.",
                actor=MemoryEvent.Actor.ADMIN,
            )
            setattr(request, AUDIT_VERB, "suggested a change to")
            self.message_user(request, SUGGESTED, messages.WARNING)
            return
        obj.pk, obj.version, obj.source = outcome.memory.pk, outcome.memory.version, outcome.memory.source

    def has_delete_permission(self, request: HttpRequest, obj: Memory | None = None) -> bool:
        # The person's own or safety notes are theirs to delete (or their account's erasure).
        if obj is not None and obj.is_protected:
            return False
        return super().has_delete_permission(request, obj)

    def delete_model(self, request: HttpRequest, obj: Memory) -> None:
        memory_delete(
            user=obj.user, memory_id=obj.pk, actor=MemoryEvent.Actor.ADMIN, reason=f"deleted by {request.user}"
        )

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Memory]) -> None:
        for memory in queryset.select_related("user"):
            self.delete_model(request, memory)

    def _embedding_for(self, request: HttpRequest, object_id: str | None) -> Embedding | None:
        """The embedding of the text being saved: the stored one when the text is unchanged
        (or was not on the form, for staff who may not read it), else asked for now."""
        stored = self.get_object(request, unquote(object_id)) if object_id else None
        summary = request.POST.get("summary", stored.summary if stored else "")
        content = request.POST.get("content", stored.content if stored else "")
        if (
            stored is not None
            and (summary, content) == (stored.summary, stored.content)
            and stored.embedding is not None
            and stored.embedding_model == settings.EMBEDDING_MODEL
        ):
            return Embedding(vector=list(stored.embedding), model=stored.embedding_model)
        return embed_memory(summary=summary, content=content)


@admin.register(MemoryEvent)
class MemoryEventAdmin(SupportSearch[MemoryEvent], ReadOnlyAdmin[MemoryEvent], PrivateTextAdmin[MemoryEvent]):
    # Append-only: history is read here, never written.
    list_display = ["created_at", "user", "memory_id", "actor", "action"]
    list_filter = ["action", "actor"]
    search_fields = ["user__email"]
    other_ids = ("memory_id",)
    list_select_related = ["user"]
    fields = ["user", "memory_id", "key", "actor", "action", "reason", "before", "after", "created_at"]
    private_fields = ("key", "reason", "before", "after")


@admin.register(MemoryProposal)
class MemoryProposalAdmin(SupportSearch[MemoryProposal], PrivateTextAdmin[MemoryProposal]):
    list_display = ["created_at", "user", "memory", "kind", "status", "decided_at"]
    list_filter = ["status", "kind"]
    search_fields = ["user__email"]
    other_ids = ("memory__id",)
    list_select_related = ["user", "memory"]
    fields = readonly_fields = ("user", "memory", "kind", "proposed", "reason", "base_version", "status", "decided_at")
    private_fields = ("proposed", "reason")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(PrivateTextViewing)
class PrivateTextViewingAdmin(SupportSearch[PrivateTextViewing], ReadOnlyAdmin[PrivateTextViewing]):
    # The audit itself: who opened whose private text, when and why (never the text).
    list_display = ["viewed_at", "viewer_email", "person", "what", "reason"]
    search_fields = ["viewer_email", "person__email"]
    person_path = "person"
    list_select_related = ["person"]
