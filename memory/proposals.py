"""Changes the coach may only suggest: to a protected memory (one the person wrote, or
one about their safety). The person confirms or rejects each on their memory page, and a
suggestion applies only to the version of the memory it was made against.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from memory.drafts import MemoryDraft, ProposalDecided, ProposalOutdated, validate_draft
from memory.embeddings import embed_memory
from memory.models import Memory, MemoryEvent, MemoryProposal, Source
from memory.store import (
    apply_draft,
    erase_for_user,
    give_neutral_key,
    lock_user,
    record_event,
    settle_store,
    store_facts,
)

if TYPE_CHECKING:
    from accounts.models import User

Actor = MemoryEvent.Actor
DECIDED = "This suggestion was answered already (in another tab, perhaps), or its memory is gone."


def proposal_make(
    *, user: User, memory: Memory, kind: str, draft: MemoryDraft | None, reason: str, actor: str = Actor.COACH
) -> MemoryProposal:
    """Ask the user to confirm a change the coach (or staff, `actor` admin) may not make itself."""
    proposed = draft.to_json() if draft is not None else None
    by = MemoryProposal.SuggestedBy.ADMIN if actor == Actor.ADMIN else MemoryProposal.SuggestedBy.COACH
    with transaction.atomic():
        lock_user(user, actor=actor)
        pending = MemoryProposal.objects.filter(
            user=user, memory=memory, kind=kind, status=MemoryProposal.Status.PENDING, suggested_by=by
        )
        for existing in pending:
            if existing.proposed == proposed:
                return existing
        proposal = MemoryProposal.objects.create(
            user=user,
            memory=memory,
            kind=kind,
            proposed=proposed,
            reason=reason,
            base_version=memory.version,
            suggested_by=by,
        )
        record_event(
            memory,
            actor=actor,
            action=MemoryEvent.Action.PROPOSAL_MADE,
            reason=reason,
            before=memory.snapshot(),
            after=proposed,
        )
    return proposal


def proposal_confirm(*, user: User, proposal_id: int, now: datetime | None = None) -> Memory | None:
    """Apply exactly the change the user was shown; refuse if the memory changed since.
    Returns the updated memory, or None when the proposal deleted it."""
    now = now or timezone.now()
    proposal = _pending(user, proposal_id).select_related("memory").first()
    if proposal is None:
        raise ProposalDecided(DECIDED)
    draft = MemoryDraft.from_fields(proposal.proposed_fields()) if proposal.kind == MemoryProposal.Kind.UPDATE else None
    if draft is not None:
        draft = validate_draft(draft, now=now, due_may_be_past=True)
    embedding = embed_memory(summary=draft.summary, content=draft.content) if draft is not None else None
    with transaction.atomic():
        lock_user(user)
        # Checked again under the lock: a second tab, or a reject, may have answered it.
        proposal = _pending(user, proposal_id).select_for_update().first()
        store_before = store_facts(user)
        memory = Memory.objects.select_for_update().filter(pk=proposal.memory_id).first() if proposal else None
        if proposal is None or memory is None:
            raise ProposalDecided(DECIDED)
        if memory.version != proposal.base_version:
            raise ProposalOutdated(
                "This memory changed after your coach suggested the change; the suggestion no longer applies."
            )
        proposal.status, proposal.decided_at = MemoryProposal.Status.CONFIRMED, now
        proposal.save(update_fields=["status", "decided_at"])
        before = memory.snapshot()
        if draft is None:
            erase_for_user(memory, action=MemoryEvent.Action.PROPOSAL_CONFIRMED, now=now)
            return None
        memory.source = Source.MANUAL
        apply_draft(memory, draft, embedding=embedding, now=now)
        give_neutral_key(memory)
        memory.save()
        record_event(
            memory,
            actor=Actor.USER,
            action=MemoryEvent.Action.PROPOSAL_CONFIRMED,
            before=before,
            after=memory.snapshot(),
            now=now,
        )
        # The change may move the memory into the ceiling's count (out of the weekly episodes).
        settle_store(memory, actor=Actor.USER, before=store_before, now=now)
    return memory


def proposal_reject(*, user: User, proposal_id: int, now: datetime | None = None) -> None:
    """Turn the suggestion down; the memory stays as it is."""
    now = now or timezone.now()
    with transaction.atomic():
        lock_user(user)
        proposal = _pending(user, proposal_id).select_for_update().first()
        if proposal is None:
            raise ProposalDecided(DECIDED)
        proposal.status, proposal.decided_at = MemoryProposal.Status.REJECTED, now
        proposal.save(update_fields=["status", "decided_at"])
        record_event(proposal.memory, actor=Actor.USER, action=MemoryEvent.Action.PROPOSAL_REJECTED, now=now)


def _pending(user: User, proposal_id: int) -> QuerySet[MemoryProposal]:
    return MemoryProposal.objects.filter(user=user, pk=proposal_id, status=MemoryProposal.Status.PENDING)
