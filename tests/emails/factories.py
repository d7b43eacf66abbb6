"""Email preferences and ledger rows for tests, and a person it is a good time to email."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, available_timezones

from django.utils import timezone

from accounts.models import User
from coach.models import ChatSession
from emails.models import LOOK_AT_NEXT_TICK, Email, EmailPreference
from emails.schedule import local_time
from offline_coach import bag_of_words_embedding

# A real zone of each whole-hour offset, so a test can put a person at any local hour.
_ZONES = sorted(zone for zone in available_timezones() if "/" in zone and not zone.startswith(("posix/", "right/")))


# Long before any instant these tests plan at.
SETTLED_AT = datetime(2025, 11, 1, 12, 0, tzinfo=UTC)


def settled(user: User) -> User:
    """The person signed up, and last wrote to their coach, long before any instant these
    tests plan at: past their first day, and not with their coach (emails/schedule.py,
    rule 4). For tests about what comes after."""
    User.objects.filter(pk=user.pk).update(date_joined=SETTLED_AT)
    ChatSession.objects.filter(user=user).update(created_at=SETTLED_AT, last_message_at=SETTLED_AT)
    user.date_joined = SETTLED_AT
    return user


def zone_at_local_hour(now: datetime, hour: int) -> str:
    """A real time zone whose wall clock shows `hour` at the instant `now`."""
    return next(zone for zone in _ZONES if local_time(now, zone).hour == hour)


def prefer(user: User, **fields: object) -> EmailPreference:
    """The person's preferences, saved as they would choose them, with `fields` over the
    defaults (a person who saves their preferences has chosen a frequency: weekly unless
    `frequency` says otherwise); `time_zone` is the person's own (on their account), set there."""
    if "time_zone" in fields:
        user.time_zone = fields.pop("time_zone")
        User.objects.filter(pk=user.pk).update(time_zone=user.time_zone)
    # As the app saves them, they are looked at by the next planning tick.
    fields.setdefault("nudge_due_at", LOOK_AT_NEXT_TICK)
    preference, _ = EmailPreference.objects.update_or_create(
        user=user, defaults=fields, create_defaults={"frequency": EmailPreference.Frequency.WEEKLY, **fields}
    )
    return preference


def reachable_now(user: User, now: datetime | None = None, **fields: object) -> EmailPreference:
    """Preferences under which `now` is mid-afternoon for the person: well inside the
    default sending window and outside the default quiet hours, for a test's duration."""
    zone = zone_at_local_hour(now or timezone.now(), 14)
    return prefer(user, time_zone=zone, **fields)


def make_email(
    user: User,
    *,
    kind: str = Email.Kind.NUDGE,
    period_key: str = "2026-W01",
    status: str = Email.Status.QUEUED,
    subject: str | None = None,
    body: str | None = None,
    sent_at: datetime | None = None,
    **fields: object,
) -> Email:
    """A ledger row; one with a subject is drafted, and embedded like the offline model would."""
    text = f"{subject}\n\n{body}" if subject is not None else None
    return Email.objects.create(
        user=user,
        kind=kind,
        period_key=period_key,
        status=status,
        subject=subject,
        body_text=body,
        body_html=f"<p>{body}</p>" if body is not None else None,
        embedding=bag_of_words_embedding(text) if text else None,
        embedding_model="bag-of-words" if text else "",
        sent_at=sent_at,
        **fields,
    )


def at(zone: str, year: int, month: int, day: int, hour: int, minute: int = 0) -> datetime:
    """The instant a wall clock in `zone` shows this time."""
    return datetime(year, month, day, hour, minute, tzinfo=ZoneInfo(zone))
