"""Reading what a person's account holds, for the memory page and the account page.

Every function takes the user and reads only that user's rows, through the selectors of
the apps that own them. The memory page reads a fixed number of queries however many
memories there are: the whole store in one (it is bounded by the eviction ceiling, and its
text is encrypted, so search runs in Python on the decrypted rows), plus one each for
proposals, forgotten memories and emails. What the pages make of the rows is pages.py's.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from django.conf import settings
from django.db.models import Model, QuerySet

from accounts.coach_sees import ContextReport
from accounts.pages import (
    COMMUNICATION,
    FORGOTTEN_PAGE,
    HISTORY_PAGE,
    NEXT_TO_FORGET_SHOWN,
    TIER_DESCRIPTIONS,
    TIER_LABELS,
    MemoryFilters,
    MemoryPage,
    MemoryRow,
    NextNote,
    Paged,
    ProposalView,
    TierGroup,
    contains,
    forgotten_memory,
    memory_history_entries,
    memory_row,
    overlap_view,
    staff_viewing_lines,
)
from coach.selectors import session_summaries_for_user
from emails.models import Email, EmailPreference
from emails.planning import sending_window
from emails.selectors import (
    email_preference_for_user,
    emails_sent_to_user,
    has_chatted,
    next_nudge_for_user,
    sent_emails_for_prompt,
)
from memory.context import assemble_memory_context
from memory.models import Tier
from memory.notes import kept_block_budget
from memory.policy import EPISODE, forgetting_order, is_protected
from memory.selectors import (
    memory_history_for_user,
    memory_list_for_user,
    overlaps_for_user,
    pending_proposals_for_user,
    recently_forgotten_for_user,
    staff_viewings_for_user,
)

if TYPE_CHECKING:
    from accounts.models import User


def memory_page_for_user(*, user: User, filters: MemoryFilters, now: datetime) -> MemoryPage:
    """Everything the memory page shows, in a number of queries that does not grow."""
    memories = list(memory_list_for_user(user=user).order_by("-updated_at", "key"))
    rows = {m.pk: memory_row(m) for m in memories}

    groups = tuple(
        TierGroup(
            tier=tier.value,
            label=TIER_LABELS[tier],
            description=TIER_DESCRIPTIONS[tier],
            rows=tuple(rows[m.pk] for m in memories if m.tier == tier and filters.matches(m)),
            total=sum(1 for m in memories if m.tier == tier),
        )
        for tier in Tier
        if filters.shows_tier(tier.value)
    )

    emails: tuple[Email, ...] | None = None
    sent = list(emails_sent_to_user(user=user))
    if filters.shows_tier(COMMUNICATION) and not filters.category:
        # An email is written before it is sent: one sent has its words (None is for one queued).
        emails = tuple(e for e in sent if contains(filters.q, e.subject or "", e.body_text or ""))

    by_id: dict[int | str, MemoryRow] = {m.pk: rows[m.pk] for m in memories}
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
        overlaps=tuple(overlap_view(overlap) for overlap in overlaps_for_user(user=user)),
        forgotten=forgotten_memories_for_user(user=user, now=now),
        next_to_forget=tuple(by_id[facts.ref] for facts in order[:NEXT_TO_FORGET_SHOWN]),
        total=len(memories),
        kept_count=sum(1 for m in memories if is_protected(m.facts)),
        room_left=max(0, settings.MEMORY_MAX_STORED - len(notes)),
        ceiling=settings.MEMORY_MAX_STORED,
        forgotten_days=settings.MEMORY_FORGOTTEN_DAYS,
        matches=sum(len(g.rows) for g in groups) + len(emails or ()),
        staff_viewings=staff_viewing_lines(staff_viewings_for_user(user=user), time_zone=user.time_zone),
        conversation_summaries=tuple(session_summaries_for_user(user=user)),
        coach_cannot_note=sum(1 for m in notes if is_protected(m.facts)) >= settings.MEMORY_MAX_STORED,
    )


def forgotten_memories_for_user(*, user: User, now: datetime, page: int = 1) -> Paged:
    """What the eviction policy removed lately and can still be restored, newest first,
    a page at a time."""
    events = recently_forgotten_for_user(user=user, now=now, days=settings.MEMORY_FORGOTTEN_DAYS)
    return _page_of(events, page, FORGOTTEN_PAGE, forgotten_memory)


def memory_history_page_for_user(*, user: User, memory_id: int, page: int = 1) -> Paged:
    """One page of a memory's history, newest first, in words."""
    events = memory_history_for_user(user=user, memory_id=memory_id).order_by("-created_at", "-pk")
    start = (page - 1) * HISTORY_PAGE
    window = list(events[start : start + HISTORY_PAGE + 1])
    entries = memory_history_entries(reversed(window[:HISTORY_PAGE]))
    return Paged(items=tuple(entries), number=page, has_more=len(window) > HISTORY_PAGE)


def _page_of[M: Model](queryset: QuerySet[M], page: int, size: int, make: Callable[[M], object]) -> Paged:
    # One row more than a page says whether another page follows, without a count.
    start = (page - 1) * size
    window = list(queryset[start : start + size + 1])
    return Paged(items=tuple(make(row) for row in window[:size]), number=page, has_more=len(window) > size)


def context_report_for_user(*, user: User, now: datetime) -> ContextReport:
    """What the next conversation would be sent of the person's memory (with the emails the
    chat is handed too), and the form each memory took: its block leaves room for the notes
    of what changes while it goes on (coach/prompting.py)."""
    budget = kept_block_budget(settings.MEMORY_CONTEXT_BUDGET_TOKENS)
    context = assemble_memory_context(
        user=user, now=now, sent_emails=sent_emails_for_prompt(user), budget_tokens=budget
    )
    shown = [item.memory_id for item in context.items if item.memory_id is not None]
    memories = {m.pk: m for m in memory_list_for_user(user=user).filter(pk__in=shown)} if shown else {}
    return ContextReport(context=context, memories=memories)


def next_note_for_user(*, user: User, now: datetime) -> NextNote:
    """The account page's "your next note": the sending rule's answer, in the person's zone."""
    preference = email_preference_for_user(user=user)
    zone = user.time_zone
    if preference.unsubscribed_at is not None:
        return NextNote(at=None, time_zone=zone, why_not="You unsubscribed, so your coach sends no notes.")
    if not preference.chosen:
        why_not = "You have not chosen how often your coach may email you yet, so it sends nothing until you do."
        return NextNote(at=None, time_zone=zone, why_not=why_not)
    if preference.frequency == EmailPreference.Frequency.OFF:
        return NextNote(at=None, time_zone=zone, why_not="You chose no notes between sessions.")
    if not user.memory_enabled:
        return NextNote(at=None, time_zone=zone, why_not="Your memory is off, so your coach sends no notes.")
    if not has_chatted(user=user):
        return NextNote(at=None, time_zone=zone, why_not="Your first note comes after your first conversation.")
    at = next_nudge_for_user(user=user, now=now, window=sending_window())
    if at is None:
        return NextNote(
            at=None, time_zone=zone, why_not="Your quiet hours leave no time in the day for a note: shorten them."
        )
    return NextNote(at=at, time_zone=zone)
