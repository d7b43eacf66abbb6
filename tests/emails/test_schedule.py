"""When the coach may email a person: the pure rule, checked over time zones and across
their daylight-saving changes. No database."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emails.schedule import (
    LOOKAHEAD,
    NudgeFacts,
    SendingHours,
    SendingWindow,
    check_in_due,
    is_episode_evening,
    is_quiet,
    local_time,
    may_email_at,
    next_nudge_time,
    next_sending_time,
    nudge_due,
    nudge_period_key,
    week_key,
    week_start,
)
from tests.emails.clocks import ZONES_WITH_DST, around_a_clock_change, in_quiet_hours, quiet_times
from tests.emails.factories import at

WINDOW = SendingWindow(9, 20)
NIGHT = SendingHours(time_zone="UTC", quiet_start=time(21, 0), quiet_end=time(8, 0))

# Quiet hours and the sending window ------------------------------------------------------


@given(moment=around_a_clock_change(), start=quiet_times, end=quiet_times)
def test_nobody_may_be_emailed_inside_their_quiet_hours_whatever_the_zone_and_clock_change(
    moment: tuple[str, datetime], start: time, end: time
) -> None:
    zone, now = moment
    hours = SendingHours(time_zone=zone, quiet_start=start, quiet_end=end)
    local = now.astimezone(ZoneInfo(zone))

    if may_email_at(now, hours, WINDOW):
        assert not in_quiet_hours(local.time(), start, end)
        assert WINDOW.start_hour <= local.hour < WINDOW.end_hour


@given(moment=around_a_clock_change(), start=quiet_times, end=quiet_times)
@settings(deadline=None)
def test_the_next_sending_time_is_allowed_and_no_minute_before_it_is(
    moment: tuple[str, datetime], start: time, end: time
) -> None:
    zone, now = moment
    hours = SendingHours(time_zone=zone, quiet_start=start, quiet_end=end)

    found = next_sending_time(now, hours, WINDOW)

    window_minutes = [time(hour, minute) for hour in range(WINDOW.start_hour, WINDOW.end_hour) for minute in range(60)]
    if all(in_quiet_hours(minute, start, end) for minute in window_minutes):
        assert found is None
        return
    assert found is not None and now <= found <= now + LOOKAHEAD
    assert may_email_at(found, hours, WINDOW)
    before = found.replace(second=0, microsecond=0) - timedelta(minutes=1) if found > now else None
    if before is not None and before >= now:
        assert not may_email_at(before, hours, WINDOW)


@pytest.mark.parametrize(
    ("local_clock", "quiet"),
    [("20:59", False), ("21:00", True), ("23:59", True), ("00:00", True), ("07:59", True), ("08:00", False)],
)
def test_quiet_hours_crossing_midnight_hold_on_both_sides_of_it(local_clock: str, quiet: bool) -> None:
    assert is_quiet(time.fromisoformat(local_clock), start=time(21, 0), end=time(8, 0)) is quiet


def test_quiet_hours_within_one_day_do_not_wrap_round_it() -> None:
    lunch = {"start": time(12, 0), "end": time(14, 0)}

    assert is_quiet(time(13, 0), **lunch)
    assert not is_quiet(time(23, 0), **lunch)
    assert not is_quiet(time(11, 59), **lunch)


def test_the_window_follows_the_persons_clock_when_it_springs_forward() -> None:
    # New York moves to daylight time on 8 March 2026: 13:30 UTC is 08:30 the day before
    # (before the window opens at 9) and 09:30 that day.
    hours = SendingHours(time_zone="America/New_York", quiet_start=time(21, 0), quiet_end=time(8, 0))

    assert not may_email_at(datetime(2026, 3, 7, 13, 30, tzinfo=UTC), hours, WINDOW)
    assert may_email_at(datetime(2026, 3, 8, 13, 30, tzinfo=UTC), hours, WINDOW)


def test_the_southern_summer_moves_the_window_the_other_way() -> None:
    # Sydney leaves daylight time on 5 April 2026: 22:30 UTC is 09:30 before, 08:30 after.
    hours = SendingHours(time_zone="Australia/Sydney", quiet_start=time(21, 0), quiet_end=time(8, 0))

    assert may_email_at(datetime(2026, 4, 3, 22, 30, tzinfo=UTC), hours, WINDOW)
    assert not may_email_at(datetime(2026, 4, 5, 22, 30, tzinfo=UTC), hours, WINDOW)


def test_an_email_kept_back_at_night_goes_when_the_quiet_hours_end() -> None:
    hours = SendingHours(time_zone="Europe/Helsinki", quiet_start=time(21, 0), quiet_end=time(8, 30))

    found = next_sending_time(at("Europe/Helsinki", 2026, 11, 30, 23, 10), hours, WINDOW)

    assert found == at("Europe/Helsinki", 2026, 12, 1, 9, 0)


def test_an_email_that_may_go_now_goes_now() -> None:
    now = datetime(2026, 11, 30, 12, 0, 30, tzinfo=UTC)

    assert next_sending_time(now, NIGHT, WINDOW) == now


def test_quiet_hours_covering_the_whole_window_leave_no_sending_time() -> None:
    always_quiet = SendingHours(time_zone="UTC", quiet_start=time(8, 0), quiet_end=time(21, 0))

    assert next_sending_time(datetime(2026, 11, 30, 12, 0, tzinfo=UTC), always_quiet, WINDOW) is None


def test_a_window_must_run_forwards_within_a_day() -> None:
    with pytest.raises(ValueError, match="sending window"):
        SendingWindow(20, 9)


# Nudges ---------------------------------------------------------------------------------


SOMEONE = NudgeFacts(hours=NIGHT, frequency="weekly", unsubscribed=False, has_chatted=True, last_emailed_at=None)


def facts(**overrides: Any) -> NudgeFacts:
    return replace(SOMEONE, **overrides)


MONDAY_NOON = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_a_weekly_nudge_is_keyed_by_the_persons_local_iso_week() -> None:
    assert nudge_due(MONDAY_NOON, facts(), WINDOW) == "2026-W49"


def test_the_local_week_can_differ_from_the_utc_week() -> None:
    # Sunday 29 November, 13:00 UTC, is already Monday 02:00 in Auckland: next week there.
    sunday = datetime(2026, 11, 29, 13, 0, tzinfo=UTC)

    assert nudge_period_key(sunday, time_zone="UTC", frequency="weekly") == "2026-W48"
    assert nudge_period_key(sunday, time_zone="Pacific/Auckland", frequency="weekly") == "2026-W49"


def test_twice_a_week_splits_the_week_after_wednesday() -> None:
    wednesday, thursday = MONDAY_NOON + timedelta(days=2), MONDAY_NOON + timedelta(days=3)

    assert nudge_period_key(wednesday, time_zone="UTC", frequency="twice_weekly") == "2026-W49-1"
    assert nudge_period_key(thursday, time_zone="UTC", frequency="twice_weekly") == "2026-W49-2"


@pytest.mark.parametrize(
    ("frequency", "days_since_last", "due"),
    [("weekly", 5, False), ("weekly", 6, True), ("twice_weekly", 2, False), ("twice_weekly", 3, True)],
)
def test_a_nudge_waits_out_the_gap_after_the_last_email(frequency: str, days_since_last: int, due: bool) -> None:
    person = facts(frequency=frequency, last_emailed_at=MONDAY_NOON - timedelta(days=days_since_last))

    assert (nudge_due(MONDAY_NOON, person, WINDOW) is not None) is due


@pytest.mark.parametrize(
    "person",
    [
        facts(frequency="off"),
        facts(unsubscribed=True),
        facts(has_chatted=False),
        facts(hours=SendingHours(time_zone="Asia/Tokyo", quiet_start=time(21, 0), quiet_end=time(8, 0))),
    ],
    ids=["frequency off", "unsubscribed", "never chatted", "21:00 in Tokyo"],
)
def test_nobody_is_nudged_who_turned_it_off_never_chatted_or_is_asleep(person: NudgeFacts) -> None:
    assert nudge_due(MONDAY_NOON, person, WINDOW) is None


# The next nudge, as the account page announces it ---------------------------------------

TICKS = (5, 20, 35, 50)


def test_the_next_weekly_nudge_comes_a_gap_after_the_last_at_a_planning_tick() -> None:
    # Last nudge on Sunday 29 November (week 48) at 14:05: six days later is Saturday 5
    # December, 14:05, in week 49, which has none yet.
    person = facts(last_emailed_at=datetime(2026, 11, 29, 14, 5, tzinfo=UTC))

    found = next_nudge_time(MONDAY_NOON, person, WINDOW, last_nudge_period="2026-W48", planning_minutes=TICKS)

    assert found == datetime(2026, 12, 5, 14, 5, tzinfo=UTC)


def test_a_nudge_whose_gap_ends_inside_the_same_week_waits_for_the_next_week() -> None:
    # Last nudge on Monday 30 November at 09:05 (week 49): the gap ends on Sunday 6
    # December, still week 49, whose nudge went already; so Monday 7 December, 09:05.
    person = facts(last_emailed_at=datetime(2026, 11, 30, 9, 5, tzinfo=UTC))

    found = next_nudge_time(MONDAY_NOON, person, WINDOW, last_nudge_period="2026-W49", planning_minutes=TICKS)

    assert found == datetime(2026, 12, 7, 9, 5, tzinfo=UTC)


def test_someone_never_nudged_gets_the_next_tick_inside_their_hours() -> None:
    late = datetime(2026, 11, 30, 20, 30, tzinfo=UTC)

    found = next_nudge_time(late, facts(), WINDOW, last_nudge_period=None, planning_minutes=TICKS)

    assert found == datetime(2026, 12, 1, 9, 5, tzinfo=UTC)


@pytest.mark.parametrize("person", [facts(frequency="off"), facts(unsubscribed=True), facts(has_chatted=False)])
def test_no_next_nudge_for_someone_who_gets_none(person: NudgeFacts) -> None:
    assert next_nudge_time(MONDAY_NOON, person, WINDOW, last_nudge_period=None, planning_minutes=TICKS) is None


@given(moment=around_a_clock_change(), start=quiet_times, end=quiet_times, days_since=st.integers(0, 10))
@settings(deadline=None, max_examples=60)
def test_the_next_nudge_is_due_by_the_rule_and_no_tick_before_it_is(
    moment: tuple[str, datetime], start: time, end: time, days_since: int
) -> None:
    zone, now = moment
    last = now - timedelta(days=days_since)
    person = facts(hours=SendingHours(time_zone=zone, quiet_start=start, quiet_end=end), last_emailed_at=last)
    last_period = nudge_period_key(last, time_zone=zone, frequency="weekly")

    found = next_nudge_time(now, person, WINDOW, last_nudge_period=last_period, planning_minutes=TICKS)

    tick = now.astimezone(UTC).replace(second=0, microsecond=0)
    end_of_search = found if found is not None else now + timedelta(days=14)
    while tick < end_of_search:
        if tick >= now and tick.minute in TICKS:
            assert nudge_due(tick, person, WINDOW) in (None, last_period)
        tick += timedelta(minutes=1)
    if found is not None:
        assert found >= now and found.minute in TICKS
        assert nudge_due(found, person, WINDOW) not in (None, last_period)


# Check-ins and weekly episodes ------------------------------------------------------------


def test_an_intention_due_in_june_is_asked_about_in_may_and_not_before_or_after() -> None:
    talk = datetime(2026, 6, 15, 9, 0, tzinfo=UTC)
    lead = timedelta(days=30)

    assert not check_in_due(datetime(2026, 5, 1, tzinfo=UTC), due_at=talk, lead=lead, last_emailed_at=None)
    assert check_in_due(datetime(2026, 5, 20, tzinfo=UTC), due_at=talk, lead=lead, last_emailed_at=None)
    assert not check_in_due(datetime(2026, 6, 16, tzinfo=UTC), due_at=talk, lead=lead, last_emailed_at=None)


def test_a_check_in_waits_a_day_after_another_email() -> None:
    now, talk = datetime(2026, 5, 20, 12, tzinfo=UTC), datetime(2026, 6, 15, tzinfo=UTC)
    lead = timedelta(days=30)

    assert not check_in_due(now, due_at=talk, lead=lead, last_emailed_at=now - timedelta(hours=23))
    assert check_in_due(now, due_at=talk, lead=lead, last_emailed_at=now - timedelta(hours=24))


def test_the_weekly_episode_is_written_on_the_persons_sunday_evening() -> None:
    assert is_episode_evening(at("Asia/Tokyo", 2026, 11, 29, 20, 0), "Asia/Tokyo")
    assert not is_episode_evening(at("Asia/Tokyo", 2026, 11, 29, 19, 59), "Asia/Tokyo")
    assert not is_episode_evening(at("Asia/Tokyo", 2026, 11, 30, 0, 0), "Asia/Tokyo")


def test_a_week_is_named_and_begins_on_the_persons_monday() -> None:
    sunday_night = at("America/New_York", 2026, 11, 29, 22, 0)

    assert week_key(sunday_night, "America/New_York") == "week-2026-48"
    assert week_start(sunday_night, "America/New_York") == at("America/New_York", 2026, 11, 23, 0, 0)
    assert local_time(week_start(sunday_night, "America/New_York"), "America/New_York").isoweekday() == 1


def test_the_property_tests_cross_clock_changes_in_several_zones() -> None:
    # The property tests above are only as good as the clock changes they cross.
    assert len(ZONES_WITH_DST) >= 6
