"""The person's email preferences and their one-click unsubscribe. Other apps ask here
rather than write these tables."""

from __future__ import annotations

from datetime import datetime, time
from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from emails.models import LOOK_AT_NEXT_TICK, Email, EmailPreference

if TYPE_CHECKING:
    from accounts.models import User

Status = Email.Status


def email_preference_update(
    *,
    user: User,
    frequency: str,
    session_summaries: bool,
    quiet_start: time,
    quiet_end: time,
) -> EmailPreference:
    """Save how often and when the coach may email the person; the row is made on first save.
    It does not undo an unsubscribe: only the person's explicit consent would. The next
    nudge's time is worked out again at the next planning tick."""
    preference, _ = EmailPreference.objects.update_or_create(
        user=user,
        defaults={
            "frequency": frequency,
            "session_summaries": session_summaries,
            "quiet_start": quiet_start,
            "quiet_end": quiet_end,
            "nudge_due_at": LOOK_AT_NEXT_TICK,
        },
    )
    return preference


def email_frequency_choose(*, user: User, frequency: str) -> EmailPreference:
    """Record how often the coach may write, as the person chose it (in onboarding); the
    rest of their preferences stay as they are, or at their defaults. Before this or
    email_preference_update, the coach sends them nothing."""
    if frequency not in EmailPreference.Frequency.values:
        raise ValueError(f"{frequency!r} is not an email frequency")
    preference, _ = EmailPreference.objects.update_or_create(
        user=user, defaults={"frequency": frequency, "nudge_due_at": LOOK_AT_NEXT_TICK}
    )
    return preference


def email_unsubscribe(*, user_id: int, now: datetime | None = None) -> bool:
    """Stop every email the coach would send the person, at once. Idempotent: the first
    unsubscribe's time is kept. Returns whether this call changed anything.

    Emails already planned are skipped here; one being sent right now is stopped by the
    send task, which reads the preferences again after claiming it."""
    now = now or timezone.now()
    if not get_user_model().objects.filter(pk=user_id).exists():
        return False
    with transaction.atomic():
        preference, _ = EmailPreference.objects.get_or_create(user_id=user_id)
        changed = EmailPreference.objects.filter(pk=preference.pk, unsubscribed_at__isnull=True).update(
            unsubscribed_at=now
        )
        Email.objects.filter(user_id=user_id, status=Status.QUEUED).update(
            status=Status.SKIPPED, error="they unsubscribed before it was sent"
        )
    return changed == 1


def email_resubscribe(*, user: User) -> bool:
    """Let the coach write again after an unsubscribe. Returns whether anything changed;
    emails skipped meanwhile stay skipped (their moment has passed)."""
    resumed = EmailPreference.objects.filter(user=user, unsubscribed_at__isnull=False)
    return resumed.update(unsubscribed_at=None, nudge_due_at=LOOK_AT_NEXT_TICK) == 1


def nudges_reconsider(*, user: User) -> None:
    """Something that decides when the person's nudges come changed outside these
    preferences (their time zone, their memory turned on): the next planning tick works
    their next nudge out again."""
    EmailPreference.objects.filter(user=user).update(nudge_due_at=LOOK_AT_NEXT_TICK)
