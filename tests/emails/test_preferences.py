"""Email preferences, written only by emails.preferences (the account page calls it)."""

from __future__ import annotations

from datetime import time

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import User
from emails.models import EmailPreference
from emails.preferences import email_preference_update
from tests.emails.factories import prefer

pytestmark = pytest.mark.django_db

CHOICES = {
    "frequency": "twice_weekly",
    "session_summaries": True,
    "quiet_start": time(22, 0),
    "quiet_end": time(7, 30),
}


def test_preferences_are_made_on_first_save_and_changed_after(user: User) -> None:
    email_preference_update(user=user, **CHOICES)
    email_preference_update(user=user, **(CHOICES | {"frequency": "weekly"}))

    preference = EmailPreference.objects.get(user=user)
    assert (preference.frequency, preference.quiet_end) == ("weekly", time(7, 30))
    assert (preference.session_summaries, preference.quiet_start) == (True, time(22, 0))
    assert EmailPreference.objects.filter(user=user).count() == 1


def test_saving_preferences_does_not_undo_an_unsubscribe(user: User) -> None:
    unsubscribed = prefer(user, unsubscribed_at=timezone.now()).unsubscribed_at

    email_preference_update(user=user, **CHOICES)

    assert EmailPreference.objects.get(user=user).unsubscribed_at == unsubscribed


def test_the_account_page_saves_through_the_emails_service(client: Client, user: User) -> None:
    client.force_login(user)

    response = client.post(
        "/account/email-preferences",
        {**CHOICES, "quiet_start": "22:00", "quiet_end": "07:30", "time_zone": "Europe/Helsinki"},
    )

    assert response.status_code == 302
    assert EmailPreference.objects.get(user=user).frequency == "twice_weekly"
    # The time zone on the form is the person's own, saved on their account.
    user.refresh_from_db()
    assert user.time_zone == "Europe/Helsinki"
