"""When the coach may email a person, and which period an email belongs to. Pure: no
database, no clock (`now` is always a parameter), so it can be checked over any instant.

1. Nobody is emailed outside the sending window (EMAIL_SENDING_WINDOW_START to _END,
   whole local hours) or inside their own quiet hours, which may cross midnight.
   Local time is the person's wall clock at that instant (zoneinfo), so daylight-saving
   changes move the window with the clock, as the person lives it.
2. A nudge goes to a person who asked for them (weekly or twice a week), has chatted at
   least once, has not unsubscribed, and has had no nudge or check-in for a while
   (MIN_GAP). It belongs to a period, the person's local ISO week or half-week: the
   ledger's unique key allows one email per period, whoever plans it how often.
3. A check-in about an intention goes when its date is within the lead window and the
   person has had no nudge or check-in in the last CHECK_IN_MIN_GAP.
4. Neither comes while the person is with their coach: not in their first day after
   signing up (FIRST_DAY), nor while they are in a conversation or within `after_chat` of
   the last message they wrote (EMAIL_WAIT_AFTER_CHAT_HOURS, and never less than the time
   a conversation takes to end idle): an email then would interrupt, or say again what
   the chat just said.
5. The next nudge is planned at the first planning tick at which rules 2 and 4 hold and
   whose period has none yet: what the account page tells the person to expect.

emails/selectors.py states rules 1 and 2 again in SQL, for every person at once; a test
holds the two to agreement over a generated population.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

WEEKLY = "weekly"
TWICE_WEEKLY = "twice_weekly"
OFF = "off"
# One nudge per period is what the ledger enforces; the gap keeps two from landing on
# either side of a period's boundary (Sunday, then Monday). It is a day shorter than the
# period so a nudge that went out a quarter of an hour late does not drift later each week.
MIN_GAP = {WEEKLY: timedelta(days=6), TWICE_WEEKLY: timedelta(days=3)}
# Several intentions coming due together are spread out, one a day at most.
CHECK_IN_MIN_GAP = timedelta(days=1)
# How far ahead next_sending_time looks: quiet hours that swallow the whole window for two
# days running swallow it every day.
LOOKAHEAD = timedelta(days=2)
# Nobody hears from their coach by email in the first day after signing up: they are
# getting to know it in the chat.
FIRST_DAY = timedelta(days=1)
# A person's weekly episode is written on their Sunday evening, from this local hour on.
EPISODE_LOCAL_WEEKDAY = 7
EPISODE_LOCAL_HOUR = 20


@dataclass(frozen=True)
class SendingWindow:
    """The local hours in which any email may go out: start <= hour < end."""

    start_hour: int
    end_hour: int

    def __post_init__(self) -> None:
        if not 0 <= self.start_hour < self.end_hour <= 24:
            raise ValueError(f"a sending window runs from 0-23 to a later hour up to 24, not {self}")


@dataclass(frozen=True)
class SendingHours:
    """A person's own timing preferences."""

    time_zone: str
    quiet_start: time
    quiet_end: time


@dataclass(frozen=True)
class NudgeFacts:
    """What decides whether a person gets a nudge now."""

    hours: SendingHours
    # None: the person has not chosen yet, and gets no nudge until they do.
    frequency: str | None
    unsubscribed: bool
    has_chatted: bool
    # The newest nudge or check-in planned for them, whatever became of it.
    last_emailed_at: datetime | None
    # When they signed up, and when they last wrote to their coach (None: never).
    joined_at: datetime | None = None
    last_said_at: datetime | None = None


def local_time(now: datetime, time_zone: str) -> datetime:
    """The person's wall clock at the instant `now`."""
    return now.astimezone(ZoneInfo(time_zone))


def is_quiet(moment: time, *, start: time, end: time) -> bool:
    """Whether a local time of day falls in quiet hours [start, end), which may cross midnight.
    Equal start and end mean no quiet hours (the preference form refuses them)."""
    if start < end:
        return start <= moment < end
    if start > end:
        return moment >= start or moment < end
    return False


def may_email_at(now: datetime, hours: SendingHours, window: SendingWindow) -> bool:
    """Whether an email may reach the person at the instant `now`."""
    local = local_time(now, hours.time_zone)
    in_window = window.start_hour <= local.hour < window.end_hour
    return in_window and not is_quiet(local.time(), start=hours.quiet_start, end=hours.quiet_end)


def next_sending_time(now: datetime, hours: SendingHours, window: SendingWindow) -> datetime | None:
    """The first moment from `now` on when the person may be emailed: `now` itself, else the
    first whole minute after it. None when their quiet hours cover the whole window.

    A plain walk over minutes: the offsets of real time zones are whole minutes, so no
    boundary falls between two, and two days of minutes cost a few milliseconds at most.
    It only runs when an email has to wait, never per person in planning."""
    if may_email_at(now, hours, window):
        return now
    moment = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while moment - now <= LOOKAHEAD:
        if may_email_at(moment, hours, window):
            return moment
        moment += timedelta(minutes=1)
    return None


def nudge_period_key(now: datetime, *, time_zone: str, frequency: str) -> str:
    """The person's local ISO week ("2026-W48"), or half-week for twice a week
    ("2026-W48-1" Monday to Wednesday, "2026-W48-2" Thursday to Sunday)."""
    year, week, weekday = local_time(now, time_zone).isocalendar()
    key = f"{year}-W{week:02d}"
    if frequency == TWICE_WEEKLY:
        key += "-1" if weekday <= 3 else "-2"
    return key


def with_their_coach(
    now: datetime, *, joined_at: datetime | None, last_said_at: datetime | None, after_chat: timedelta
) -> bool:
    """Rule 4: whether the person is with their coach at `now`, so no follow-up reaches them:
    in their first day, or in a conversation or within `after_chat` of their last message."""
    if joined_at is not None and now - joined_at < FIRST_DAY:
        return True
    return last_said_at is not None and now - last_said_at < after_chat


def nudge_due(
    now: datetime, person: NudgeFacts, window: SendingWindow, *, after_chat: timedelta = timedelta(0)
) -> str | None:
    """The period key of the nudge the person is due now, or None when none is."""
    if person.frequency not in MIN_GAP or person.unsubscribed or not person.has_chatted:
        return None
    if person.last_emailed_at is not None and now - person.last_emailed_at < MIN_GAP[person.frequency]:
        return None
    if with_their_coach(now, joined_at=person.joined_at, last_said_at=person.last_said_at, after_chat=after_chat):
        return None
    if not may_email_at(now, person.hours, window):
        return None
    return nudge_period_key(now, time_zone=person.hours.time_zone, frequency=person.frequency)


def next_nudge_time(
    now: datetime,
    person: NudgeFacts,
    window: SendingWindow,
    *,
    last_nudge_period: str | None,
    planning_minutes: Sequence[int],
    after_chat: timedelta = timedelta(0),
) -> datetime | None:
    """When the person's next nudge will be planned: the first planning tick from `now` on
    (the minutes of each hour at which planning runs) at which `nudge_due` holds and whose
    period is not the one their last nudge took. None when they get no nudges at all, or
    their quiet hours leave no time for one.

    A walk over ticks, four an hour for a period and a gap at most (about 1,300 steps): it
    answers one person's account page, never planning."""
    if person.frequency not in MIN_GAP or person.unsubscribed or not person.has_chatted:
        return None
    minutes = sorted(set(planning_minutes))
    # Planning runs on UTC's clock (CELERY_TIMEZONE), so its ticks are UTC minutes.
    moment = _tick_at_or_after(now.astimezone(UTC), minutes)
    horizon = now + MIN_GAP[person.frequency] + timedelta(days=8)
    while moment <= horizon:
        period = nudge_due(moment, person, window, after_chat=after_chat)
        if period is not None and period != last_nudge_period:
            return moment
        moment = _tick_at_or_after(moment + timedelta(minutes=1), minutes)
    return None


def _tick_at_or_after(moment: datetime, minutes: Sequence[int]) -> datetime:
    start = moment if moment.second == 0 and moment.microsecond == 0 else moment + timedelta(minutes=1)
    start = start.replace(second=0, microsecond=0)
    hour = start.replace(minute=0)
    for minute in minutes:
        if minute >= start.minute:
            return hour.replace(minute=minute)
    return hour + timedelta(hours=1, minutes=minutes[0])


def check_in_due(
    now: datetime,
    *,
    due_at: datetime,
    lead: timedelta,
    last_emailed_at: datetime | None,
    joined_at: datetime | None = None,
    last_said_at: datetime | None = None,
    after_chat: timedelta = timedelta(0),
) -> bool:
    """Whether an open intention dated `due_at` is to be asked about now (timing aside)."""
    if not now < due_at <= now + lead:
        return False
    if with_their_coach(now, joined_at=joined_at, last_said_at=last_said_at, after_chat=after_chat):
        return False
    return last_emailed_at is None or now - last_emailed_at >= CHECK_IN_MIN_GAP


def week_key(now: datetime, time_zone: str) -> str:
    """The person's local ISO week as a memory key: "week-2026-48"."""
    year, week, _ = local_time(now, time_zone).isocalendar()
    return f"week-{year}-{week:02d}"


def week_start(now: datetime, time_zone: str) -> datetime:
    """The instant the person's local week began (Monday, midnight, their clock), in UTC."""
    local = local_time(now, time_zone)
    monday = (local - timedelta(days=local.isoweekday() - 1)).date()
    return datetime.combine(monday, time(0), tzinfo=ZoneInfo(time_zone)).astimezone(UTC)


def episode_evening(now: datetime, time_zone: str) -> datetime:
    """The instant, in UTC, of the person's Sunday evening in the local week of `now`: from
    then on their week is due to be written up."""
    local = local_time(now, time_zone)
    monday = (local - timedelta(days=local.isoweekday() - 1)).date()
    evening = datetime.combine(
        monday + timedelta(days=EPISODE_LOCAL_WEEKDAY - 1), time(EPISODE_LOCAL_HOUR), tzinfo=ZoneInfo(time_zone)
    )
    return evening.astimezone(UTC)


def is_episode_evening(now: datetime, time_zone: str) -> bool:
    """Whether it is the person's Sunday evening, when their week is written up."""
    local = local_time(now, time_zone)
    return local.isoweekday() == EPISODE_LOCAL_WEEKDAY and local.hour >= EPISODE_LOCAL_HOUR
