"""No email is sent inside quiet hours: the send task itself, driven at instants around
daylight-saving changes in several zones, with quiet hours that may cross midnight; and
judged at the time of sending, after the draft, however long the model took."""

from __future__ import annotations

from datetime import datetime, time, timedelta
from itertools import count
from zoneinfo import ZoneInfo

import pytest
from django.core import mail
from django.utils import timezone
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from accounts.models import User
from coach.models import ChatSession
from emails.models import Email
from emails.sending import SendOutcome, email_send
from offline_coach import ModelServer
from tests.emails.clocks import around_a_clock_change, in_quiet_hours, quiet_times
from tests.emails.factories import make_email, prefer, reachable_now

pytestmark = pytest.mark.django_db

WINDOW_HOURS = range(9, 20)
# A check-in needs an open intention besides; the hours are the same for every kind.
KINDS = [Email.Kind.NUDGE, Email.Kind.SESSION_SUMMARY]
DRAFT = "Subject: Your long run\n\nHi Ada,\n\nHow did Sunday's long run feel?"
MODEL_SECONDS = 3.0
_periods = count()


def allowed(instant: datetime, zone: str, start: time, end: time) -> bool:
    local = instant.astimezone(ZoneInfo(zone))
    return local.hour in WINDOW_HOURS and not in_quiet_hours(local.time(), start, end)


@given(moment=around_a_clock_change(), start=quiet_times, end=quiet_times, kind=st.sampled_from(KINDS))
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_send_task_never_sends_inside_quiet_hours(
    user: User, moment: tuple[str, datetime], start: time, end: time, kind: str
) -> None:
    # One person throughout; each example changes their preferences and plans a fresh,
    # already drafted email (no model call), then runs the send at the drawn instant.
    zone, now = moment
    prefer(user, time_zone=zone, quiet_start=start, quiet_end=end, session_summaries=True)
    # A recap is of a summarised conversation (one whose summary is gone is never sent).
    recapped = ChatSession.objects.create(user=user, summary="You ran 5 km.", summarised_at=now)
    session = recapped if kind == Email.Kind.SESSION_SUMMARY else None
    email = make_email(
        user, kind=kind, period_key=f"example-{next(_periods)}", subject="Hello", body="Hi Ada,\n\nHi.", session=session
    )
    mail.outbox.clear()

    outcome = email_send(email_id=email.pk, now=now)

    email.refresh_from_db()
    event(f"outcome: {outcome}")
    if outcome == SendOutcome.SENT:
        assert allowed(now, zone, start, end)
        assert len(mail.outbox) == 1
    elif outcome == SendOutcome.DEFERRED:
        assert not allowed(now, zone, start, end)
        assert email.send_after > now and allowed(email.send_after, zone, start, end)
        assert mail.outbox == []
    else:
        assert outcome == SendOutcome.SKIPPED
        assert email.error == "their quiet hours cover the whole sending window"
        assert mail.outbox == []


def test_a_draft_that_runs_into_the_persons_quiet_hours_is_held_for_their_next_sending_time(
    user: User, model_server: ModelServer
) -> None:
    reachable_now(user)
    local = timezone.now().astimezone(ZoneInfo(user.time_zone))
    # Their quiet hours begin while the model is still writing.
    starts, ends = local + timedelta(seconds=MODEL_SECONDS / 2), local + timedelta(hours=1)
    prefer(user, quiet_start=starts.time(), quiet_end=ends.time())
    model_server.queue_text(DRAFT, delay_seconds=MODEL_SECONDS)
    email = make_email(user)

    assert email_send(email_id=email.pk) == SendOutcome.DEFERRED

    held = Email.objects.get(pk=email.pk)
    assert (held.status, held.subject, held.claimed_at) == ("queued", "Your long run", None)
    assert ends <= held.send_after <= ends + timedelta(minutes=1)
    assert mail.outbox == []
    # At their next sending time it goes as it was drafted, without asking the model again.
    assert email_send(email_id=email.pk, now=held.send_after) == SendOutcome.SENT
    assert len(mail.outbox) == 1 and len(model_server.chat_requests()) == 1
    assert Email.objects.get(pk=email.pk).sent_at == held.send_after
