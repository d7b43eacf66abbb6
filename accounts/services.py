"""Writes the account page makes: email preferences and erasing the account.

Memory writes (add, edit, delete, restore, delete all) are memory.services'; the account
app owns the person's preferences (DESIGN.md section 2), stored beside the email ledger.
"""

from __future__ import annotations

from datetime import time

from django.db import transaction

from accounts.models import User
from emails.models import EmailPreference


def email_preference_update(
    *,
    user: User,
    frequency: str,
    session_summaries: bool,
    quiet_start: time,
    quiet_end: time,
    time_zone: str,
) -> EmailPreference:
    """Save how often and when the coach may email the person; the row is made on first save."""
    preference, _ = EmailPreference.objects.update_or_create(
        user=user,
        defaults={
            "frequency": frequency,
            "session_summaries": session_summaries,
            "quiet_start": quiet_start,
            "quiet_end": quiet_end,
            "time_zone": time_zone,
        },
    )
    return preference


def account_delete(*, user: User) -> None:
    """Erase the person and every row about them.

    Memories, their events and proposals, chat sessions and messages, emails and email
    preferences cascade in the database itself; allauth's rows (email addresses and their
    confirmations) and the admin log cascade in Django's collector. One transaction: either
    all of it goes or none of it does.
    """
    with transaction.atomic():
        User.objects.filter(pk=user.pk).delete()
