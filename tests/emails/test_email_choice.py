"""Nobody is emailed before they chose to be: a person who has not said how often the coach
may write (in onboarding or on the account page) gets no email of any kind, and "no
emails" is a choice that is kept."""

from __future__ import annotations

from datetime import time, timedelta

import pytest
from django.utils import timezone

from accounts.models import User
from coach.models import ChatSession
from emails.models import Email, EmailPreference
from emails.planning import check_ins_plan, emails_dispatch_due, nudges_plan, session_recap_plan, session_recaps_plan
from emails.preferences import email_frequency_choose, email_preference_update
from emails.sending import email_send
from tests.coach.factories import make_session
from tests.emails.factories import make_email, settled, zone_at_local_hour
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db


@pytest.fixture
def handed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The ids handed to the send task (the task itself is not run)."""
    from emails.tasks import send_email

    ids: list[int] = []
    monkeypatch.setattr(send_email, "delay", ids.append)
    return ids


def due_everything(user: User) -> ChatSession:
    """Someone every planner would write to now, were they asking for email: mid-afternoon
    on their clock, chatted, a session just summarised, an intention two days away."""
    now = timezone.now()
    User.objects.filter(pk=user.pk).update(time_zone=zone_at_local_hour(now, 14))
    user.refresh_from_db()
    session = make_session(user, "I finished chapter three", "Wonderful.")
    settled(user)
    ChatSession.objects.filter(pk=session.pk).update(summary="Finished chapter three.", summarised_at=now)
    make_memory(user, "talk", tier="prospective", category="project", due_at=now + timedelta(days=2))
    return session


def plan_everything(django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        check_ins_plan()
        nudges_plan()
        session_recaps_plan()
        emails_dispatch_due()


def test_someone_who_has_not_chosen_gets_no_email_of_any_kind_until_they_choose(
    user: User, handed: list[int], django_capture_on_commit_callbacks
) -> None:
    session = due_everything(user)
    # A row with recaps asked for but no frequency chosen (as an unsubscribe and a resume
    # leave it): still nothing.
    EmailPreference.objects.create(user=user, session_summaries=True)

    plan_everything(django_capture_on_commit_callbacks)
    assert session_recap_plan(session_id=session.pk) is None

    assert not Email.objects.filter(user=user).exists() and handed == []

    email_preference_update(
        user=user, frequency="weekly", session_summaries=True, quiet_start=time(21, 0), quiet_end=time(8, 0)
    )
    plan_everything(django_capture_on_commit_callbacks)

    kinds = set(Email.objects.filter(user=user).values_list("kind", flat=True))
    assert kinds == {"check_in", "session_summary"} and len(handed) == 2


def test_an_email_planned_before_the_choice_is_skipped_when_its_time_comes(user: User) -> None:
    due_everything(user)
    EmailPreference.objects.create(user=user, session_summaries=True)
    planned = [
        make_email(user, kind=kind, period_key=f"earlier-{kind}", created_at=timezone.now() - timedelta(days=30))
        for kind in ("nudge", "session_summary")
    ]

    outcomes = [email_send(email_id=email.pk) for email in planned]

    assert outcomes == ["skipped", "skipped"]
    assert set(Email.objects.filter(user=user).values_list("status", "error")) == {
        ("skipped", "they have not chosen how often the coach may write")
    }


def test_choosing_no_emails_is_kept_and_sends_nothing(user: User, django_capture_on_commit_callbacks) -> None:
    due_everything(user)

    email_frequency_choose(user=user, frequency="off")
    plan_everything(django_capture_on_commit_callbacks)

    preference = EmailPreference.objects.get(user=user)
    assert preference.frequency == "off" and preference.chosen
    assert not Email.objects.filter(user=user).exists()


def test_choosing_a_frequency_leaves_the_other_preferences_as_they_were(user: User) -> None:
    EmailPreference.objects.create(user=user, quiet_start=time(22, 0), quiet_end=time(6, 30), session_summaries=True)

    email_frequency_choose(user=user, frequency="twice_weekly")

    preference = EmailPreference.objects.get(user=user)
    assert (preference.frequency, preference.quiet_start, preference.quiet_end, preference.session_summaries) == (
        "twice_weekly",
        time(22, 0),
        time(6, 30),
        True,
    )
    with pytest.raises(ValueError, match="'hourly' is not an email frequency"):
        email_frequency_choose(user=user, frequency="hourly")
    assert EmailPreference.objects.get(user=user).frequency == "twice_weekly"
