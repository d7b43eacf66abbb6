"""The proposals the person ticked, saved as their own memories: `user`, protected,
neutrally named, labelled with the assistant they said it came from, and, like every write
of theirs, never refused for space (memory.policy, rule 4); the store's ceiling is kept by
forgetting the coach's oldest notes, in the same transaction. A proposal the person chose
to stand in place of a memory they kept replaces that memory's text, as an edit of theirs
would."""

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
from memory.models import ImportedFrom, Memory, MemoryEvent, Source
from memory.policy import Eviction
from memory.services import memory_save
from memory.store import lock_user

if TYPE_CHECKING:
    from accounts.models import User

IMPORT_REASON = "imported from {source}"
REPLACED_REASON = "replaced by what you imported from {source}"
CHANGED_SINCE = (
    "The memory of yours this was to replace changed or was deleted after this list was made, so nothing was "
    "saved. Split what you pasted again to compare it with your memories as they stand now."
)
REPLACED_TWICE = "Another of these already replaces that memory of yours: choose one to stand in its place."


def import_reason(imported_from: str, *, replaced: bool = False) -> str:
    """What a memory's history says of an import: where from, as the person said."""
    source = ImportedFrom(imported_from).label if imported_from in ImportedFrom.values else ImportedFrom.ANOTHER.label
    return (REPLACED_REASON if replaced else IMPORT_REASON).format(source=source)


class ImportInvalid(Exception):
    """Ticked proposals that cannot be saved as they are: for each one's place in the
    list, its field names (`summary`, `details`, `tier`, `category`; `replaces` for the
    memory it was to replace) and what is wrong."""

    def __init__(self, errors: dict[int, dict[str, str]]) -> None:
        super().__init__(f"{len(errors)} proposals cannot be saved as they are")
        self.errors = errors


@dataclass(frozen=True)
class ImportOutcome:
    saved: tuple[Memory, ...]
    evicted: tuple[Eviction, ...]
    room: ImportRoom
    # Of `saved`, those that replaced a memory the person kept.
    replaced: tuple[Memory, ...] = ()


def memories_import(
    *, user: User, proposals: Sequence[Proposal], imported_from: str = "", now: datetime | None = None
) -> ImportOutcome:
    """Save the proposals the person ticked (as they edited them) as their own memories,
    labelled as imported from `imported_from` (an ImportedFrom value).

    Every one is checked first (ImportInvalid names each problem; then nothing is saved),
    all are embedded in one call before any transaction, and all are saved in one, each
    under a neutral key with a `created` event. One marked `replaces` takes the place of the
    person's memory it was shown beside: that memory's text becomes it (an `updated` event),
    provided the memory is as the review showed it (ImportInvalid otherwise). They are the
    person's, so never refused for space: the eviction policy makes room by forgetting the
    coach's oldest notes, in that same transaction, and what is kept for good may pass the
    ceiling.
    """
    now = now or timezone.now()
    drafts = _checked_drafts(proposals, now=now)
    # One embedding call for all of them, made before any transaction opens.
    embeddings = llm.embed([memory_text(summary=d.summary, content=d.content) for d in drafts])
    saved: list[Memory] = []
    replaced: list[Memory] = []
    evicted: list[Eviction] = []
    with transaction.atomic():
        lock_user(user)
        taken = set(Memory.objects.filter(user=user).values_list("key", flat=True))
        replacing = _memories_replaced(user, proposals)
        for proposal, draft, embedding in zip(proposals, drafts, embeddings, strict=True):
            kept = replacing.get(proposal.kept) if proposal.replaces else None
            if kept is None:
                key = neutral_key(draft.category, taken)
                taken.add(key)
            outcome = memory_save(
                user=user,
                draft=replace(draft, key=kept.key if kept else key),
                source=Source.USER,
                actor=MemoryEvent.Actor.USER,
                reason=import_reason(imported_from, replaced=kept is not None),
                embedding=embedding,
                expected_version=kept.version if kept else None,
                now=now,
            )
            saved.append(outcome.memory)
            evicted.extend(outcome.evicted)
            if kept is not None:
                replaced.append(outcome.memory)
        Memory.objects.filter(pk__in=[m.pk for m in saved]).update(imported_from=imported_from)
        for memory in saved:
            memory.imported_from = imported_from
        room = import_room_for_user(user=user)
    return ImportOutcome(saved=tuple(saved), evicted=tuple(evicted), room=room, replaced=tuple(replaced))


def _memories_replaced(user: User, proposals: Sequence[Proposal]) -> dict[int | None, Memory]:
    """The person's memories the proposals are to replace, locked, as the review showed
    them; ImportInvalid naming each that changed or went since (nothing is then saved)."""
    wanted = [p.kept for p in proposals if p.replaces and p.kept is not None]
    found = {m.pk: m for m in Memory.objects.select_for_update().filter(user=user, pk__in=wanted)}
    errors: dict[int, dict[str, str]] = {}
    chosen: set[int] = set()
    for index, proposal in enumerate(proposals):
        if not proposal.replaces or proposal.kept is None:
            continue
        if proposal.kept not in found or found[proposal.kept].version != proposal.kept_version:
            errors[index] = {"replaces": CHANGED_SINCE}
        elif proposal.kept in chosen:
            errors[index] = {"replaces": REPLACED_TWICE}
        chosen.add(proposal.kept)
    if errors:
        raise ImportInvalid(errors)
    return {pk: memory for pk, memory in found.items()}


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
