"""Reading what a person's account holds, for the memory page and the account page.

Every function takes the user and reads only that user's rows, through the selectors of
the apps that own them. The memory page reads a fixed number of queries however many
memories there are: the whole store in one (it is bounded by the eviction ceiling, and its
text is encrypted, so search runs in Python on the decrypted rows), plus one each for
proposals, forgotten memories and emails. What the pages make of the rows is pages.py's.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from django.conf import settings

from accounts.pages import (
    COMMUNICATION,
    CONTEXT_SECTIONS,
    NEXT_TO_FORGET_SHOWN,
    TIER_DESCRIPTIONS,
    ContextLine,
    ContextReport,
    ForgottenMemory,
    MemoryFilters,
    MemoryPage,
    NextNote,
    ProposalView,
    TierGroup,
    contains,
    forgotten_memory,
    memory_row,
)
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
from memory.policy import EPISODE, forgetting_order, is_protected
from memory.selectors import memory_list_for_user, pending_proposals_for_user, recently_forgotten_for_user

if TYPE_CHECKING:
    from accounts.models import User


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
    sent = list(emails_sent_to_user(user=user))
    if filters.shows_tier(COMMUNICATION) and not filters.category:
        emails = tuple(e for e in sent if contains(filters.q, e.subject, e.body_text))

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


def context_report_for_user(*, user: User, now: datetime) -> ContextReport:
    context = assemble_memory_context(user=user, now=now, sent_emails=sent_emails_for_prompt(user))
    lines = tuple(
        ContextLine(
            part=CONTEXT_SECTIONS.get(item.section, item.section),
            label=item.label,
            tokens=item.tokens,
            included=item.included,
        )
        for item in context.items
        # The block markers are plumbing: a fresh random nonce on each side of the memories.
        if item.section != "block"
    )
    return ContextReport(context=context, lines=lines, budget=settings.MEMORY_CONTEXT_BUDGET_TOKENS)


def next_note_for_user(*, user: User, now: datetime) -> NextNote:
    """The account page's "your next note": the sending rule's answer, in the person's zone."""
    preference = email_preference_for_user(user=user)
    zone = preference.time_zone
    if preference.unsubscribed_at is not None:
        return NextNote(at=None, time_zone=zone, why_not="You unsubscribed, so your coach sends no notes.")
    if preference.frequency == EmailPreference.Frequency.OFF:
        return NextNote(at=None, time_zone=zone, why_not="You chose no notes between sessions.")
    if not has_chatted(user=user):
        return NextNote(at=None, time_zone=zone, why_not="Your first note comes after your first conversation.")
    at = next_nudge_for_user(user=user, now=now, window=sending_window())
    if at is None:
        return NextNote(
            at=None, time_zone=zone, why_not="Your quiet hours leave no time in the day for a note: shorten them."
        )
    return NextNote(at=at, time_zone=zone)
