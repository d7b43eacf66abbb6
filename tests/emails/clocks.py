"""Clocks for property tests: time zones of every kind, instants around their daylight-saving
changes, and quiet hours stated independently of the code under test."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

from hypothesis import strategies as st

# Both hemispheres, half- and quarter-hour offsets, zones with and without daylight saving.
ZONES = [
    "Europe/Helsinki",
    "Europe/London",
    "America/New_York",
    "America/St_Johns",
    "America/Santiago",
    "Australia/Sydney",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "Asia/Kathmandu",
    "Asia/Kolkata",
]
MICROSECONDS_A_DAY = 24 * 3600 * 10**6


def offset_changes(zone: str, year: int) -> list[datetime]:
    """The instants in `year` at which the zone's clocks change."""
    tz = ZoneInfo(zone)
    moment, end = datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
    changes = []
    while moment < end:
        later = moment + timedelta(minutes=30)
        if moment.astimezone(tz).utcoffset() != later.astimezone(tz).utcoffset():
            changes.append(later)
        moment = later
    return changes


CHANGES = {zone: offset_changes(zone, 2026) for zone in ZONES}
ZONES_WITH_DST = [zone for zone, changes in CHANGES.items() if changes]


@st.composite
def around_a_clock_change(draw: st.DrawFn) -> tuple[str, datetime]:
    """A zone, and an instant within two days of one of its clock changes (or anywhere in
    the year, for the zones whose clocks never change)."""
    zone = draw(st.sampled_from(ZONES))
    if CHANGES[zone]:
        change = draw(st.sampled_from(CHANGES[zone]))
        instant = change + timedelta(seconds=draw(st.integers(-2 * 86400, 2 * 86400)))
    else:
        instant = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=draw(st.integers(0, 365 * 86400)))
    return zone, instant


quiet_times = st.times().map(lambda t: t.replace(second=0, microsecond=0))


def clock(t: time) -> int:
    return ((t.hour * 60 + t.minute) * 60 + t.second) * 10**6 + t.microsecond


def in_quiet_hours(moment: time, start: time, end: time) -> bool:
    """Quiet hours stated another way: the time is less far round the clock from the start
    than the end is. Crossing midnight needs no case of its own here."""
    length = (clock(end) - clock(start)) % MICROSECONDS_A_DAY
    return (clock(moment) - clock(start)) % MICROSECONDS_A_DAY < length
