"""What changed in a person's memory since a conversation's prompt was assembled, as short
notes the model reads where the change happened, and the changes that cannot be notes.

A conversation keeps its system prompt, memory block included, byte for byte (DESIGN.md
section 3.3), so every turn's request begins with the previous one's. What the coach saves,
updates or deletes meanwhile, a suggestion made or turned down, an intention coming due,
reaches the model as a dated note appended at the point it happened: a safety memory in
full, anything else by its one line. The person's own corrections are not notes: an edit
or a deletion by them must never sit behind the old text, and deleted text is never sent
again, so those ask for the prompt to be assembled afresh.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from infra.tokens import estimate_tokens
from memory.models import Memory, MemoryEvent
from memory.policy import PROTECTED_CATEGORIES

Action, Actor = MemoryEvent.Action, MemoryEvent.Actor

# What the person (or staff) did that the prompt must be assembled again for.
PERSONS_CORRECTION = "the person changed their memory"
# What share (in percent) of the memory budget a conversation's kept block leaves free for
# the notes of what changes while it goes on; past it, the block is assembled again.
NOTES_SHARE_PERCENT = 10
# Who made a memory, as the model is told: staff are support, never the person.
_WHO_ADDED: dict[str, str] = {Actor.COACH: "You saved", Actor.ADMIN: "Support added"}
# Changes the model learns nothing from.
_BOOKKEEPING = frozenset({Action.REEMBEDDED})


@dataclass(frozen=True)
class Note:
    """One change, as the model reads it, and where it goes: after what came before `at`."""

    at: datetime
    text: str

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.text + "\n")


def kept_block_budget(budget_tokens: int) -> int:
    """The budget a conversation's kept memory block is assembled within: the memory budget
    less the share kept free for notes."""
    return budget_tokens - budget_tokens * NOTES_SHARE_PERCENT // 100


def notes_of(events: Sequence[MemoryEvent], *, time_zone: str) -> tuple[list[Note], str | None]:
    """The notes for these events (oldest first), or the reason they cannot be notes."""
    zone = ZoneInfo(time_zone)
    notes = []
    for event in events:
        if event.action in _BOOKKEEPING:
            continue
        if event.actor in (Actor.USER, Actor.ADMIN) and event.action not in (Action.CREATED, Action.PROPOSAL_REJECTED):
            return [], PERSONS_CORRECTION
        text = _said(event)
        if text:
            notes.append(
                Note(at=event.created_at, text=f"[memory note, {event.created_at.astimezone(zone):%-d %b}] {text}")
            )
    return notes, None


def due_note(memory: Memory, *, at: datetime, time_zone: str) -> Note:
    """An intention that came due while the conversation went on."""
    day = memory.due_at.astimezone(ZoneInfo(time_zone)).date().isoformat() if memory.due_at else "soon"
    text = f"{memory.key} is now due ({day}): bring it up when it fits. {memory.summary}"
    return Note(at=at, text=f"{_dated(at, ZoneInfo(time_zone))} {text}")


def _dated(moment: datetime, zone: ZoneInfo) -> str:
    return f"[memory note, {moment.astimezone(zone):%-d %b}]"


def _said(event: MemoryEvent) -> str:
    after, key = event.after_fields(), event.key or "a memory"
    protected = after.get("category") in PROTECTED_CATEGORIES
    whole = json.dumps({"summary": after.get("summary"), "content": after.get("content")}, ensure_ascii=False)
    line = whole if protected else str(after.get("summary", ""))
    if event.action == Action.CREATED:
        who = _WHO_ADDED.get(event.actor, "The person added")
        return f"{who} {key}: {line}"
    if event.action in (Action.UPDATED, Action.MERGED, Action.RESTORED):
        return f"{key} now reads: {line}"
    if event.action in (Action.DELETED, Action.EVICTED):
        return f"{key} is no longer kept: do not rely on it."
    if event.action == Action.PROPOSAL_MADE:
        return f"You suggested a change to {key}; until the person confirms it, {key} stays as it is."
    if event.action == Action.PROPOSAL_REJECTED:
        return f"The person turned down your suggestion about {key}: it stays as it is."
    if event.action == Action.RAISED:
        return f"You asked about {key} in an email."
    return ""
