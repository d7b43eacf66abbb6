"""No email is sent inside quiet hours: the send task itself, driven at instants around
daylight-saving changes in several zones, with quiet hours that may cross midnight."""

from __future__ import annotations

from datetime import datetime, time
from itertools import count
from zoneinfo import ZoneInfo

import pytest
from django.core import mail
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from accounts.models import User
from emails.models import Email
from emails.sending import SendOutcome, email_send
from tests.emails.clocks import around_a_clock_change, in_quiet_hours, quiet_times
from tests.emails.factories import make_email, prefer

pytestmark = pytest.mark.django_db

WINDOW_HOURS = range(9, 20)
# A check-in needs an open intention besides; the hours are the same for every kind.
KINDS = [Email.Kind.NUDGE, Email.Kind.SESSION_SUMMARY]
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
    email = make_email(user, kind=kind, period_key=f"example-{next(_periods)}", subject="Hello", body="Hi Ada,\n\nHi.")
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
