"""Safety notes the coach saved although they read like another memory, offered to the
person: merge the two into one memory of theirs, or keep both."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from memory.drafts import MemoryDraft, MemoryNotFound
from memory.embeddings import embed_memory, memory_text
from memory.models import SUMMARY_MAX_CHARS, Memory, MemoryEvent, MemoryOverlap, Source
from memory.near_copies import CANDIDATES, is_near
from memory.policy import EPISODE, USER_SOURCES
from memory.selectors import SimilarMemory, memories_by_similarity
from memory.store import apply_draft, give_neutral_key, lock_user, record_event

if TYPE_CHECKING:
    from accounts.models import User

Actor = MemoryEvent.Actor
GONE = "One of these memories is gone (deleted, merged or forgotten meanwhile); nothing to merge."


def overlaps_record(*, user: User, memory: Memory, similar: Sequence[SimilarMemory]) -> int:
    """Note that `memory` reads like each of `similar`, for the person to decide on."""
    rows = [
        MemoryOverlap(user=user, memory=memory, other=s.memory, similarity=s.similarity)
        for s in similar
        if s.memory.pk != memory.pk
    ]
    return len(MemoryOverlap.objects.bulk_create(rows, ignore_conflicts=True))


def overlaps_offer(*, user: User, memory: Memory) -> list[SimilarMemory]:
    """The person's memories `memory` reads like, by the rule of a save's near-copy flag
    (memory/near_copies.py), recorded to be offered on the memory page: merge, or keep both.
    What the person adds on the page is never refused; it is checked like this after. No
    embedding request: the memory's own embedding is compared, and its words."""
    if memory.embedding is None:
        return []
    found = memories_by_similarity(
        user=user,
        vector=[float(value) for value in memory.embedding],
        model=memory.embedding_model,
        text=memory_text(summary=memory.summary, content=memory.content),
        limit=CANDIDATES,
        exclude_key=memory.key,
        # A weekly episode is the record of a week: never the same fact as a note.
        exclude_category=EPISODE,
    )
    near = [f for f in found if is_near(f.why)]
    overlaps_record(user=user, memory=memory, similar=near)
    return near


def overlap_merge(*, user: User, overlap_id: int, now: datetime | None = None) -> Memory:
    """Fold one memory of the pair into the other. The one kept is the person's own where
    there is one (else the older); it takes both texts and becomes theirs, hence protected.
    The other goes, recorded as merged."""
    now = now or timezone.now()
    overlap = MemoryOverlap.objects.select_related("memory", "other").filter(user=user, pk=overlap_id).first()
    if overlap is None:
        raise MemoryNotFound(GONE)
    keep, fold = _kept_and_folded(overlap.memory, overlap.other)
    draft = MemoryDraft(
        key=keep.key,
        tier=keep.tier,
        category=keep.category,
        summary=_fuller(keep.summary, fold.summary),
        content=_merged_text(keep.content, fold.content),
        due_at=keep.due_at,
        status=keep.status,
    )
    embedding = embed_memory(summary=draft.summary, content=draft.content)
    with transaction.atomic():
        lock_user(user)
        kept = Memory.objects.select_for_update().filter(user=user, pk=keep.pk).first()
        folded = Memory.objects.select_for_update().filter(user=user, pk=fold.pk).first()
        if kept is None or folded is None:
            raise MemoryNotFound(GONE)
        snapshot = kept.snapshot()
        kept.source = Source.MANUAL
        apply_draft(kept, draft, embedding=embedding, now=now)
        give_neutral_key(kept)
        kept.save()
        record_event(
            kept,
            actor=Actor.USER,
            action=MemoryEvent.Action.MERGED,
            reason="you merged a note that read like this one into it",
            before=snapshot,
            after=kept.snapshot(),
            now=now,
        )
        record_event(
            folded,
            actor=Actor.USER,
            action=MemoryEvent.Action.DELETED,
            reason="you merged it into another memory",
            before=folded.snapshot(),
            now=now,
        )
        folded.delete()
    return kept


def overlap_dismiss(*, user: User, overlap_id: int, now: datetime | None = None) -> bool:
    """The person says the two are different facts: the pair is not offered again."""
    dismissed = MemoryOverlap.objects.filter(user=user, pk=overlap_id, dismissed_at__isnull=True).update(
        dismissed_at=now or timezone.now()
    )
    return dismissed == 1


def _fuller(kept: str, folded: str) -> str:
    """The kept one-liner, unless the folded one says all of it and more ("Allergic to
    peanuts" / "Allergic to peanuts and cashews"): no detail is lost in the merge."""
    if len(folded) <= SUMMARY_MAX_CHARS and _says_all_of(folded, kept):
        return folded
    return kept


def _merged_text(kept: str, folded: str) -> str:
    if _says_all_of(kept, folded):
        return kept
    if _says_all_of(folded, kept):
        return folded
    return f"{kept}\n{folded}"


def _says_all_of(text: str, other: str) -> bool:
    return " ".join(other.casefold().split()) in " ".join(text.casefold().split())


def _kept_and_folded(first: Memory, second: Memory) -> tuple[Memory, Memory]:
    for memory, other in ((first, second), (second, first)):
        if memory.source in USER_SOURCES and other.source not in USER_SOURCES:
            return memory, other
    return (first, second) if (first.created_at, first.pk) <= (second.created_at, second.pk) else (second, first)
