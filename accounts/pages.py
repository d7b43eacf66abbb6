"""What the account pages show, in the person's words: the view-models the memory page and
a memory's history are rendered from, and the wording they use ("what your coach sees" is
accounts/coach_sees.py).

Pure: built from rows the selectors (accounts/selectors.py) read, never querying.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings

from coach.models import ChatSession
from emails.models import Email
from memory.models import Memory, MemoryEvent, MemoryOverlap, MemoryProposal, PrivateTextViewing, Source, Tier
from memory.policy import protection_reason
from memory.undo import DeletedMemory, undo_minutes, undo_token

COMMUNICATION = "communication"
# Long lists come a page at a time: a person with hundreds of forgotten notes, or a memory
# with a long history, still gets a page that loads at once.
FORGOTTEN_PAGE = 20
HISTORY_PAGE = 50

NEXT_TO_FORGET_SHOWN = 5

# The tiers as the person reads them: what each holds, not the design's names for them.
TIER_LABELS = {
    Tier.PROFILE: "About you",
    Tier.EPISODIC: "From your conversations",
    Tier.PROSPECTIVE: "Coming up",
}
TIER_DESCRIPTIONS = {
    Tier.PROFILE: "Who you are. Your coach reads all of it at the start of every conversation.",
    Tier.EPISODIC: "Notes from your sessions: what happened, what helped, what to watch for.",
    Tier.PROSPECTIVE: "Things to bring up later, each with the date your coach will raise it.",
}
COMMUNICATION_LABEL = "Communication history"

WRITTEN_BY: dict[str, str] = {
    Source.USER: "written by you",
    Source.ONBOARDING: "from your onboarding",
    Source.MANUAL: "you edited it",
    Source.COACH: "your coach wrote this",
    Source.ADMIN: "added by our support team",
}


def written_by(memory: Memory) -> str:
    """Who wrote a memory, as the person reads it: an import says where it came from."""
    if memory.source == Source.USER and memory.imported_from:
        return f"imported from {memory.get_imported_from_display()}"
    return WRITTEN_BY.get(memory.source, memory.source)


ACTORS: dict[str, str] = {
    MemoryEvent.Actor.USER: "you",
    MemoryEvent.Actor.COACH: "your coach",
    MemoryEvent.Actor.ADMIN: "an administrator",
    MemoryEvent.Actor.SYSTEM: "the app",
}


@dataclass(frozen=True)
class Paged:
    """One page of a long list, and whether another follows."""

    items: tuple[Any, ...]
    number: int
    has_more: bool

    @property
    def next_number(self) -> int:
        return self.number + 1

    def __iter__(self) -> Iterator[Any]:
        # Templates loop over a page as over its items.
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


@dataclass(frozen=True)
class NextNote:
    """When the coach will next write between sessions, or why it will not."""

    at: datetime | None
    time_zone: str
    why_not: str = ""


@dataclass(frozen=True)
class MemoryFilters:
    tier: str = ""
    category: str = ""
    q: str = ""

    @property
    def active(self) -> bool:
        return bool(self.tier or self.category or self.q)

    def shows_tier(self, tier: str) -> bool:
        return not self.tier or self.tier == tier

    def matches(self, memory: Memory) -> bool:
        if self.category and memory.category != self.category:
            return False
        return contains(self.q, memory.summary, memory.content, memory.key)


@dataclass(frozen=True)
class MemoryRow:
    """One memory as the page shows it."""

    memory: Memory
    written_by: str
    kept_because: str | None

    @property
    def shows_content(self) -> bool:
        return self.memory.content.strip() != self.memory.summary.strip()


@dataclass(frozen=True)
class TierGroup:
    tier: str
    label: str
    description: str
    rows: tuple[MemoryRow, ...]
    total: int


@dataclass(frozen=True)
class ProposalView:
    proposal: MemoryProposal
    proposed: dict[str, Any]
    outdated: bool

    @property
    def is_delete(self) -> bool:
        return self.proposal.kind == MemoryProposal.Kind.DELETE

    @property
    def reason(self) -> str:
        # Said by the app, to the person: the model's own reason is written for the model
        # (it may speak of "the user", or call a change a merge); it stays in the history.
        if self.proposal.suggested_by == MemoryProposal.SuggestedBy.ADMIN:
            return "Our support team suggests this change; it is yours to confirm or turn down."
        if self.is_delete:
            return "Your coach thinks this no longer holds, from what you said."
        if " ".join(str(self.proposed.get("summary") or "").split()) != self.proposal.memory.summary:
            return "Your coach thinks this has changed, from what you said."
        return "Your coach would add to this, from what you said."

    @property
    def coach_note(self) -> str:
        """The coach's own reason, when it is written to the person ("You said…"); one that
        speaks of them as "the user" was written for the model, and is left to the history."""
        said = self.proposal.reason.strip()
        return in_your_words(said) if _TO_THE_PERSON.search(said) and not _ABOUT_THE_USER.search(said) else ""


@dataclass(frozen=True)
class ForgottenMemory:
    event: MemoryEvent
    fields: dict[str, Any]
    restorable_until: datetime

    @property
    def reason(self) -> str:
        return in_your_words(self.event.reason)


@dataclass(frozen=True)
class OverlapView:
    """Two memories that read alike: a safety note the coach kept beside another."""

    overlap: MemoryOverlap
    first: MemoryRow
    second: MemoryRow


@dataclass(frozen=True)
class MemoryPage:
    groups: tuple[TierGroup, ...]
    # None when the filters hide the communication tier.
    emails: tuple[Email, ...] | None
    email_total: int
    proposals: tuple[ProposalView, ...]
    overlaps: tuple[OverlapView, ...]
    forgotten: Paged
    next_to_forget: tuple[MemoryRow, ...]
    total: int
    kept_count: int
    # Unprotected notes the coach may still add before the oldest start to go.
    room_left: int
    ceiling: int
    forgotten_days: int
    matches: int
    # When staff read the person's private text, in their words (newest first).
    staff_viewings: tuple[str, ...] = ()
    # Kept-for-good notes (besides episodes) at or past the ceiling: nothing can be evicted
    # to make room, so every new note of the coach's is refused (memory.policy, rule 4).
    coach_cannot_note: bool = False
    # Ended conversations whose summary the coach keeps (it draws recaps and episodes on them).
    conversation_summaries: tuple[ChatSession, ...] = ()


@dataclass(frozen=True)
class UndoOffer:
    """ "Deleted · Undo": what the page holds to bring a deleted memory back, and until when."""

    summary: str
    token: str
    until: datetime

    @property
    def minutes(self) -> int:
        return undo_minutes()


def undo_offer(deleted: DeletedMemory) -> UndoOffer:
    return UndoOffer(
        summary=deleted.summary,
        token=undo_token(deleted),
        until=deleted.deleted_on + timedelta(seconds=settings.MEMORY_UNDO_SECONDS),
    )


def overlap_view(overlap: MemoryOverlap) -> OverlapView:
    return OverlapView(overlap=overlap, first=memory_row(overlap.other), second=memory_row(overlap.memory))


def memory_row(memory: Memory) -> MemoryRow:
    return MemoryRow(
        memory=memory,
        written_by=written_by(memory),
        kept_because=protection_reason(memory.facts),
    )


def forgotten_memory(event: MemoryEvent) -> ForgottenMemory:
    return ForgottenMemory(
        event=event,
        fields=event.before_fields(),
        restorable_until=event.created_at + timedelta(days=settings.MEMORY_FORGOTTEN_DAYS),
    )


@dataclass(frozen=True)
class HistoryEntry:
    """One event of a memory's history, in words."""

    event: MemoryEvent
    says: str
    before: dict[str, Any]
    after: dict[str, Any]
    erased: bool

    @property
    def reason(self) -> str:
        # The coach's reasons come from the model; one about "the user" was written for the
        # model, not for the person reading their history, and what happened says enough.
        if self.event.actor == MemoryEvent.Actor.COACH and _ABOUT_THE_USER.search(self.event.reason):
            return ""
        return in_your_words(self.event.reason)

    @property
    def labels(self) -> tuple[str, str]:
        # A suggestion changed nothing yet: it says what was proposed, not what it became.
        if self.event.action == MemoryEvent.Action.PROPOSAL_MADE:
            return ("Then", "Suggested")
        return ("Was", "Became")

    @property
    def text_changed(self) -> bool:
        return bool(self.before and self.after) and (
            self.before.get("summary"),
            self.before.get("content"),
        ) != (self.after.get("summary"), self.after.get("content"))


_SAYS: dict[str, str] = {
    MemoryEvent.Action.CREATED: "{actor} saved it",
    MemoryEvent.Action.UPDATED: "{actor} changed it",
    MemoryEvent.Action.MERGED: "{actor} merged a similar note into it",
    MemoryEvent.Action.DELETED: "{actor} deleted it",
    MemoryEvent.Action.EVICTED: "forgotten to make room for newer notes",
    MemoryEvent.Action.RESTORED: "{actor} restored it",
    MemoryEvent.Action.PROPOSAL_MADE: "{actor} suggested a change",
    MemoryEvent.Action.PROPOSAL_CONFIRMED: "{actor} accepted your coach's suggestion",
    MemoryEvent.Action.PROPOSAL_REJECTED: "{actor} turned down your coach's suggestion",
    MemoryEvent.Action.REEMBEDDED: "re-indexed for search",
    MemoryEvent.Action.RAISED: "{actor} brought it up",
}
# Actions whose event normally carries the memory's text; without it, it was erased.
_CARRIES_TEXT = frozenset(
    {
        MemoryEvent.Action.CREATED,
        MemoryEvent.Action.UPDATED,
        MemoryEvent.Action.MERGED,
        MemoryEvent.Action.EVICTED,
        MemoryEvent.Action.RESTORED,
        MemoryEvent.Action.PROPOSAL_MADE,
        MemoryEvent.Action.PROPOSAL_CONFIRMED,
    }
)


def memory_history_entries(events: Iterable[MemoryEvent]) -> list[HistoryEntry]:
    """A memory's events (from memory.selectors.memory_history_for_user) in words, newest first."""
    entries = []
    for event in events:
        before, after = event.before_fields(), event.after_fields()
        says = _SAYS.get(event.action, event.get_action_display()).format(actor=ACTORS.get(event.actor, event.actor))
        entries.append(
            HistoryEntry(
                event=event,
                says=says[0].upper() + says[1:],
                before=before,
                after=after,
                erased=event.action in _CARRIES_TEXT and not before and not after,
            )
        )
    return entries[::-1]


_TO_THE_PERSON = re.compile(r"\b(you|your|you're|you've)\b", re.IGNORECASE)
_ABOUT_THE_USER = re.compile(r"\b(the|this) (user|person)\b|\buser's\b", re.IGNORECASE)


def in_your_words(reason: str) -> str:
    """A reason recorded by the app (an eviction's, a suggestion's) as the person reads it:
    the coach is theirs ("the oldest of your coach's session notes")."""
    return _THE_COACH.sub(lambda found: "Your coach" if found[0][0] == "T" else "your coach", reason)


_THE_COACH = re.compile(r"\b[Tt]he coach\b")


def contains(query: str, *texts: str) -> bool:
    if not query:
        return True
    needle = query.casefold()
    return any(needle in text.casefold() for text in texts)


def staff_viewing_lines(viewings: Iterable[PrivateTextViewing], *, time_zone: str) -> tuple[str, ...]:
    """One line per day and reason: "An administrator opened your memories on 2 December:
    support request"; and one per action: "An administrator changed memory 4 on 2 December"."""
    zone = ZoneInfo(time_zone)
    lines: list[str] = []
    for viewing in viewings:
        day = f"{viewing.viewed_at.astimezone(zone):%-d %B}"
        if viewing.kind == PrivateTextViewing.Kind.ACTION:
            line = f"An administrator {viewing.what} on {day}"
        else:
            line = f"An administrator opened your memories on {day}: {viewing.reason}"
        if line not in lines:
            lines.append(line)
    return tuple(lines)
