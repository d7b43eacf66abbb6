"""The proposals the person ticked, saved as their own memories: `user`, protected,
neutrally named, and, like every write of theirs, never refused for space
(memory.policy, rule 4); the store's ceiling is kept by forgetting the coach's oldest
notes, in the same transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from infra import llm
from memory.drafts import MemoryDraft, MemoryInvalid, validate_draft
from memory.embeddings import memory_text
from memory.imports.review import ImportRoom, import_room_for_user
from memory.imports.splitting import IMPORT_CATEGORIES, Proposal
from memory.keys import neutral_key
from memory.models import Memory, MemoryEvent, Source
from memory.policy import Eviction
from memory.services import memory_save
from memory.store import lock_user

if TYPE_CHECKING:
    from accounts.models import User

IMPORT_REASON = "imported from another assistant"


class ImportInvalid(Exception):
    """Ticked proposals that cannot be saved as they are: for each one's place in the
    list, its field names (`summary`, `details`, `tier`, `category`) and what is wrong."""

    def __init__(self, errors: dict[int, dict[str, str]]) -> None:
        super().__init__(f"{len(errors)} proposals cannot be saved as they are")
        self.errors = errors


@dataclass(frozen=True)
class ImportOutcome:
    saved: tuple[Memory, ...]
    evicted: tuple[Eviction, ...]
    room: ImportRoom


def memories_import(*, user: User, proposals: Sequence[Proposal], now: datetime | None = None) -> ImportOutcome:
    """Save the proposals the person ticked (as they edited them) as their own memories.

    Every one is checked first (ImportInvalid names each problem; then nothing is saved),
    all are embedded in one call before any transaction, and all are saved in one, each
    under a neutral key with a `created` event. They are the person's, so never refused
    for space: the eviction policy makes room by forgetting the coach's oldest notes, in
    that same transaction, and what is kept for good may pass the ceiling.
    """
    now = now or timezone.now()
    drafts = _checked_drafts(proposals, now=now)
    # One embedding call for all of them, made before any transaction opens.
    embeddings = llm.embed([memory_text(summary=d.summary, content=d.content) for d in drafts])
    saved: list[Memory] = []
    evicted: list[Eviction] = []
    with transaction.atomic():
        lock_user(user)
        taken = set(Memory.objects.filter(user=user).values_list("key", flat=True))
        for draft, embedding in zip(drafts, embeddings, strict=True):
            key = neutral_key(draft.category, taken)
            taken.add(key)
            outcome = memory_save(
                user=user,
                draft=replace(draft, key=key),
                source=Source.USER,
                actor=MemoryEvent.Actor.USER,
                reason=IMPORT_REASON,
                embedding=embedding,
                now=now,
            )
            saved.append(outcome.memory)
            evicted.extend(outcome.evicted)
        room = import_room_for_user(user=user)
    return ImportOutcome(saved=tuple(saved), evicted=tuple(evicted), room=room)


def _checked_drafts(proposals: Sequence[Proposal], *, now: datetime) -> list[MemoryDraft]:
    """Each proposal as a memory draft, or ImportInvalid naming every one that cannot be
    (its errors under the form's names: `details` for a memory's content)."""
    drafts: list[MemoryDraft] = []
    errors: dict[int, dict[str, str]] = {}
    for index, proposal in enumerate(proposals):
        # A stand-in key, to check the rest: the real one is chosen under the person's lock.
        draft = MemoryDraft(
            key="import-1",
            tier=proposal.tier,
            category=proposal.category,
            summary=proposal.summary,
            content=proposal.details,
        )
        try:
            drafts.append(validate_draft(draft, now=now))
        except MemoryInvalid as invalid:
            errors[index] = {
                "details" if name == "content" else name: message for name, message in invalid.errors.items()
            }
        if proposal.category not in IMPORT_CATEGORIES:
            errors.setdefault(index, {})["category"] = f"must be one of {', '.join(IMPORT_CATEGORIES)}"
    if errors:
        raise ImportInvalid(errors)
    return drafts
