"""What the account pages show, in the person's words: the view-models the memory page,
a memory's history and "what your coach sees" are rendered from, and the wording they use.

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

from emails.models import Email
from memory.context import LEFT_OUT, LINE, WHOLE, ContextItem, MemoryContext
from memory.models import Memory, MemoryEvent, MemoryOverlap, MemoryProposal, PrivateTextViewing, Source, Tier
from memory.policy import protection_reason
from memory.undo import DeletedMemory, undo_minutes, undo_token

COMMUNICATION = "communication"
# Long lists come a page at a time: a person with hundreds of forgotten notes, or a memory
# with a long history, still gets a page that loads at once.
FORGOTTEN_PAGE = 20
HISTORY_PAGE = 50

NEXT_TO_FORGET_SHOWN = 5

TIER_DESCRIPTIONS = {
    Tier.PROFILE: "Who you are. Your coach reads all of it at the start of every conversation.",
    Tier.EPISODIC: "Notes from your sessions: what happened, what helped, what to watch for.",
    Tier.PROSPECTIVE: "Things to bring up later, each with the date your coach will raise it.",
}
COMMUNICATION_LABEL = "Communication history"

WRITTEN_BY = {
    Source.USER: "written by you",
    Source.ONBOARDING: "from your onboarding",
    Source.MANUAL: "you edited it",
    Source.COACH: "your coach wrote this",
    Source.ADMIN: "added by our support team",
}
ACTORS = {
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
        return in_your_words(self.proposal.reason)


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
        written_by=WRITTEN_BY.get(memory.source, memory.source),
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


_SAYS = {
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


CONTEXT_FORMS = {
    WHOLE: "In full",
    LINE: "One line",
    LEFT_OUT: "Left out for lack of room",
}
# Who a memory came from, as the person reads it on "what your coach sees". The prompt
# tells the model its own notes are by "you"; to the person, "you" is themselves.
CONTEXT_SOURCES = {
    Source.USER: "you told your coach",
    Source.ONBOARDING: "from onboarding",
    Source.MANUAL: "you edited or kept it",
    Source.COACH: "your coach's note",
    Source.ADMIN: "added by our support team",
}
# The prompt's topics, as headings a person reads, in the prompt's own order.
CONTEXT_TOPICS = {
    "injury": "Injuries",
    "allergy": "Allergies",
    "medical": "Health",
    "safety": "Safety",
    "constraint": "Limits",
    "background": "About you",
    "preference": "What you prefer",
    "goal": "Goals",
    "habit": "Habits",
    "schedule": "Your schedule",
    "feedback": "How you like to be coached",
    "project": "Projects",
    "reference": "References",
    "episode": "Weekly summaries",
    "other": "Other",
    "emails": "Emails your coach sent you lately",
}
# The relationship stage (memory.context.STAGES), as the person would put it.
CONTEXT_STAGES = {
    "new": "Your coach is getting to know you: it listens more than it coaches, and notes the basics you tell it.",
    "developing": "Your coach tailors its suggestions to you and refers back to earlier conversations.",
    "established": "Your coach knows you well: it is direct, notices patterns across sessions and gently names "
    "what you avoid.",
}


@dataclass(frozen=True)
class ContextEntry:
    """One memory or email as the coach reads it, in the person's words."""

    item: ContextItem
    form: str
    source: str
    # The memory itself (its details and date), when the item is one.
    memory: Memory | None = None

    @property
    def in_full(self) -> bool:
        return self.item.form == WHOLE

    @property
    def left_out(self) -> bool:
        return self.item.form == LEFT_OUT

    @property
    def shows_content(self) -> bool:
        return self.memory is not None and self.memory.content.strip() != self.memory.summary.strip()


@dataclass(frozen=True)
class ContextSection:
    """One topic of the prompt's memory block, in the order the coach reads them."""

    topic: str
    heading: str
    entries: tuple[ContextEntry, ...]


@dataclass(frozen=True)
class ContextReport:
    """What the next turn would send of the person's memory, and the form each memory took."""

    context: MemoryContext
    # The person's memories by id, for what an item shows beyond its one line.
    memories: dict[int, Memory]

    @property
    def memory_used(self) -> bool:
        return self.context.used

    @property
    def dropped(self) -> tuple[ContextItem, ...]:
        return self.context.dropped

    @property
    def whole(self) -> int:
        return sum(1 for item in self.context.items if item.form == WHOLE)

    @property
    def as_lines(self) -> int:
        return sum(1 for item in self.context.items if item.form == LINE)

    @property
    def stage_says(self) -> str:
        return CONTEXT_STAGES.get(self.context.stage, "")

    @property
    def sections(self) -> tuple[ContextSection, ...]:
        sections: list[ContextSection] = []
        entries: list[ContextEntry] = []
        for index, item in enumerate(self.context.items):
            entries.append(self._entry(item))
            following = self.context.items[index + 1] if index + 1 < len(self.context.items) else None
            if following is None or following.topic != item.topic:
                heading = CONTEXT_TOPICS.get(item.topic, item.topic.capitalize())
                sections.append(ContextSection(topic=item.topic, heading=heading, entries=tuple(entries)))
                entries = []
        return tuple(sections)

    def _entry(self, item: ContextItem) -> ContextEntry:
        memory = self.memories.get(item.memory_id) if item.memory_id is not None else None
        if item.kind == "email":
            return ContextEntry(item=item, form=CONTEXT_FORMS[item.form], source="an email your coach sent you")
        return ContextEntry(
            item=item,
            form=CONTEXT_FORMS[item.form],
            source=CONTEXT_SOURCES.get(item.source, "your coach's note"),
            memory=memory,
        )


def staff_viewing_lines(viewings: Iterable[PrivateTextViewing], *, time_zone: str) -> tuple[str, ...]:
    """One line per day and reason: "An administrator opened your memories on 2 December:
    support request"."""
    zone = ZoneInfo(time_zone)
    lines: list[str] = []
    for viewing in viewings:
        line = f"An administrator opened your memories on {viewing.viewed_at.astimezone(zone):%-d %B}: {viewing.reason}"
        if line not in lines:
            lines.append(line)
    return tuple(lines)
