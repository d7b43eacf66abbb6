"""Reading what a person's account holds, for the memory page and the account page.

Every function takes the user and reads only that user's rows. The memory page reads a
fixed number of queries however many memories there are: the whole store in one (it is
bounded by the eviction ceiling, and its text is encrypted, so search runs in Python on
the decrypted rows), plus one each for proposals, forgotten memories and emails.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import QuerySet

from accounts.models import User
from emails.models import Email, EmailPreference
from memory.context import MemoryContext, assemble_memory_context
from memory.models import Memory, MemoryEvent, MemoryProposal, Source, Tier
from memory.policy import EPISODE, forgetting_order, is_protected, protection_reason
from memory.selectors import memory_list_for_user, pending_proposals_for_user, recently_forgotten_for_user

COMMUNICATION = "communication"
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
}
ACTORS = {
    MemoryEvent.Actor.USER: "you",
    MemoryEvent.Actor.COACH: "your coach",
    MemoryEvent.Actor.ADMIN: "an administrator",
    MemoryEvent.Actor.SYSTEM: "the app",
}


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
        return _contains(self.q, memory.summary, memory.content, memory.key)


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


@dataclass(frozen=True)
class ForgottenMemory:
    event: MemoryEvent
    fields: dict[str, Any]
    restorable_until: datetime


@dataclass(frozen=True)
class MemoryPage:
    groups: tuple[TierGroup, ...]
    # None when the filters hide the communication tier.
    emails: tuple[Email, ...] | None
    email_total: int
    proposals: tuple[ProposalView, ...]
    forgotten: tuple[ForgottenMemory, ...]
    next_to_forget: tuple[MemoryRow, ...]
    total: int
    kept_count: int
    # Unprotected notes the coach may still add before the oldest start to go.
    room_left: int
    ceiling: int
    forgotten_days: int
    matches: int


def memory_row(memory: Memory) -> MemoryRow:
    return MemoryRow(
        memory=memory,
        written_by=WRITTEN_BY.get(memory.source, memory.source),
        kept_because=protection_reason(memory.facts),
    )


def memory_page_for_user(*, user: User, filters: MemoryFilters, now: datetime) -> MemoryPage:
    """Everything the memory page shows, in a number of queries that does not grow."""
    memories = list(memory_list_for_user(user=user).order_by("-updated_at", "key"))
    rows = {m.pk: memory_row(m) for m in memories}

    groups = tuple(
        TierGroup(
            tier=tier.value,
            label=tier.label,
            description=TIER_DESCRIPTIONS[tier],
            rows=tuple(rows[m.pk] for m in memories if m.tier == tier and filters.matches(m)),
            total=sum(1 for m in memories if m.tier == tier),
        )
        for tier in Tier
        if filters.shows_tier(tier.value)
    )

    emails: tuple[Email, ...] | None = None
    sent = list(sent_emails_for_user(user=user))
    if filters.shows_tier(COMMUNICATION) and not filters.category:
        emails = tuple(e for e in sent if _contains(filters.q, e.subject, e.body_text))

    by_key = {m.key: rows[m.pk] for m in memories}
    order = forgetting_order(m.facts for m in memories)
    notes = [m for m in memories if m.category != EPISODE]
    return MemoryPage(
        groups=groups,
        emails=emails,
        email_total=len(sent),
        proposals=tuple(
            ProposalView(proposal=p, proposed=p.proposed_fields(), outdated=p.memory.version != p.base_version)
            for p in pending_proposals_for_user(user=user)
        ),
        forgotten=tuple(forgotten_memories_for_user(user=user, now=now)),
        next_to_forget=tuple(by_key[facts.key] for facts in order[:NEXT_TO_FORGET_SHOWN]),
        total=len(memories),
        kept_count=sum(1 for m in memories if is_protected(m.facts)),
        room_left=max(0, settings.MEMORY_MAX_STORED - len(notes)),
        ceiling=settings.MEMORY_MAX_STORED,
        forgotten_days=settings.MEMORY_FORGOTTEN_DAYS,
        matches=sum(len(g.rows) for g in groups) + len(emails or ()),
    )


def forgotten_memories_for_user(*, user: User, now: datetime) -> list[ForgottenMemory]:
    """What the eviction policy removed lately and can still be restored, newest first."""
    events = recently_forgotten_for_user(user=user, now=now, days=settings.MEMORY_FORGOTTEN_DAYS)
    return [forgotten_memory(event) for event in events]


def forgotten_memory(event: MemoryEvent) -> ForgottenMemory:
    return ForgottenMemory(
        event=event,
        fields=event.before_fields(),
        restorable_until=event.created_at + timedelta(days=settings.MEMORY_FORGOTTEN_DAYS),
    )


def sent_emails_for_user(*, user: User) -> QuerySet[Email]:
    """The communication tier: every email sent to the user, newest first."""
    return (
        Email.objects.filter(user=user, status=Email.Status.SENT)
        .defer("embedding", "body_html")
        .order_by("-sent_at", "-created_at", "-pk")
    )


def email_preference_for_user(*, user: User) -> EmailPreference:
    """The user's email preferences; the defaults, unsaved, until they first save them."""
    return EmailPreference.objects.filter(user=user).first() or EmailPreference(user=user)


@dataclass(frozen=True)
class HistoryEntry:
    """One event of a memory's history, in words."""

    event: MemoryEvent
    says: str
    before: dict[str, Any]
    after: dict[str, Any]
    erased: bool

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


def memory_history_entries(events: QuerySet[MemoryEvent]) -> list[HistoryEntry]:
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


def _contains(query: str, *texts: str) -> bool:
    if not query:
        return True
    needle = query.casefold()
    return any(needle in text.casefold() for text in texts)


_CONTEXT_SECTIONS = {
    "stage": "Your relationship stage",
    "instructions": "How to read memories",
    "protected": "Kept for good, in full",
    "profile": "Profile, in full",
    "prospective": "Coming up now, in full",
    "index": "One line in the index",
    "episodic": "Session note, in full",
    "episode": "Weekly summary, in full",
    "emails": "An email you were sent",
}


@dataclass(frozen=True)
class ContextLine:
    part: str
    label: str
    tokens: int
    included: bool


@dataclass(frozen=True)
class ContextReport:
    """What the next turn would send of the person's memory, and what it leaves out."""

    context: MemoryContext
    lines: tuple[ContextLine, ...]
    budget: int

    @property
    def dropped(self) -> tuple[ContextLine, ...]:
        return tuple(line for line in self.lines if not line.included)


def context_report_for_user(*, user: User, now: datetime) -> ContextReport:
    context = assemble_memory_context(user=user, now=now)
    lines = tuple(
        ContextLine(
            part=_CONTEXT_SECTIONS.get(item.section, item.section),
            label=item.label,
            tokens=item.tokens,
            included=item.included,
        )
        for item in context.items
        # The block markers are plumbing: a fresh random nonce on each side of the memories.
        if item.section != "block"
    )
    return ContextReport(context=context, lines=lines, budget=settings.MEMORY_CONTEXT_BUDGET_TOKENS)
