"""What changed in a person's memory since a conversation's prompt was assembled, as notes the
model reads where the change happened, and the changes that cannot be notes.

A conversation keeps its system prompt, memory block included, byte for byte (DESIGN.md
section 3.3), so every turn's request begins with the previous one's. What the coach saves,
updates or deletes meanwhile, a suggestion made or turned down, an intention coming due,
reaches the model as a note at the point it happened. A note is data, like the block: each
memory in it reads as it does in the block (memory/memory_lines.py), labelled by who made
the change (you, the person, support), and the notes between two messages are handed to
the model together as the result of the app's own `memory_notes` call, inside markers that
carry the conversation's nonce, never as an instruction (coach/prompting.py). The
relationship stage is counted again where it changes. The person's own corrections are
not notes: an edit or a deletion by them must never sit behind the old text, and deleted
text is never sent again, so those ask for the prompt to be assembled afresh.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from infra.tokens import estimate_tokens
from memory.memory_lines import MemoryLine, day_said, index_line, whole_text
from memory.models import Memory, MemoryEvent, Source
from memory.policy import PROTECTED_CATEGORIES

Action, Actor = MemoryEvent.Action, MemoryEvent.Actor

# What the person (or staff) did that the prompt must be assembled again for.
PERSONS_CORRECTION = "the person changed their memory"
# What share (in percent) of the memory budget a conversation's kept block leaves free for
# the notes of what changes while it goes on; past it, the block is assembled again.
NOTES_SHARE_PERCENT = 10
# The app's own call whose result carries the notes: never offered to the model as a tool.
NOTES_CALL = "memory_notes"
# Changes the model learns nothing from.
_BOOKKEEPING = frozenset({Action.REEMBEDDED})
_ADDED_BY: dict[str, str] = {Actor.COACH: "You saved", Actor.ADMIN: "Support added", Actor.USER: "The person added"}
# What changes the count the relationship stage is read from.
_BORN = frozenset({Action.CREATED, Action.RESTORED})
_GONE = frozenset({Action.DELETED, Action.EVICTED})


@dataclass(frozen=True)
class Note:
    """One change, as the model reads it, and where it goes: after what came before `at`.
    `learned`: the memories learned in conversation once it happened, where it changed them."""

    at: datetime
    text: str
    learned: int | None = None

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.text + "\n")


def kept_block_budget(budget_tokens: int) -> int:
    """The budget a conversation's kept memory block is assembled within: the memory budget
    less the share kept free for notes."""
    return budget_tokens - budget_tokens * NOTES_SHARE_PERCENT // 100


def notes_of(
    events: Sequence[MemoryEvent], *, time_zone: str, learned: int | None = None
) -> tuple[list[Note], str | None]:
    """The notes for these events (oldest first), or the reason they cannot be notes.
    `learned`: what the kept block counted, from which each note counts on."""
    zone = ZoneInfo(time_zone)
    notes = []
    for event in events:
        if event.action in _BOOKKEEPING:
            continue
        if event.actor in (Actor.USER, Actor.ADMIN) and event.action not in (Action.CREATED, Action.PROPOSAL_REJECTED):
            return [], PERSONS_CORRECTION
        text = _said(event, zone)
        if not text:
            continue
        changed = _learned_change(event)
        if learned is not None and changed:
            learned += changed
        notes.append(Note(at=event.created_at, text=text, learned=learned if changed else None))
    return notes, None


def due_note(memory: Memory, *, at: datetime, time_zone: str) -> Note:
    """An intention that came due while the conversation went on."""
    zone = ZoneInfo(time_zone)
    today = at.astimezone(zone).date()
    line = index_line(MemoryLine.of(memory, zone), today=today, zone=zone, bring_up=True)
    return Note(at=at, text=f"{day_said(today, today=today)}: now due, bring it up when it fits:\n{line}")


def _said(event: MemoryEvent, zone: ZoneInfo) -> str:
    today = event.created_at.astimezone(zone).date()
    when, key = day_said(today, today=today), event.key or "a memory"
    after = event.after_fields()
    if event.action in (Action.CREATED, Action.UPDATED, Action.MERGED, Action.RESTORED) and after:
        memory = MemoryLine.from_snapshot(after, on=today)
        # A change in full (it replaces the block's entry, details and all); a new memory in
        # full when it concerns safety, else by its line, as the block would have it.
        changed = event.action != Action.CREATED
        shown = whole_text if changed or after.get("category") in PROTECTED_CATEGORIES else index_line
        line = shown(memory, today=today, zone=zone)
        if event.action == Action.CREATED:
            return f"{when}, {_ADDED_BY.get(event.actor, 'The person added')}:\n{line}"
        return f"{when}, you changed {key}; it now reads:\n{line}"
    if event.action in _GONE:
        return f"{when}: {key} is no longer kept; do not rely on it."
    if event.action == Action.PROPOSAL_MADE:
        return f"{when}: you suggested a change to {key}; until the person confirms it, {key} stays as it is."
    if event.action == Action.PROPOSAL_REJECTED:
        return f"{when}: the person turned down your suggestion about {key}; it stays as it is."
    if event.action == Action.RAISED:
        return f"{when}: you asked about {key} in an email."
    return ""


def _learned_change(event: MemoryEvent) -> int:
    if event.action in _BORN:
        return int(event.after_fields().get("source") != Source.ONBOARDING)
    if event.action in _GONE:
        before = event.before_fields()
        return -int(bool(before) and before.get("source") != Source.ONBOARDING)
    return 0
