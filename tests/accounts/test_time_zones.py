"""The zones a person picks from, and dates and times as the pages show them."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, date, datetime
from types import SimpleNamespace

import pytest
from django.template import Context, Template

from accounts.time_zones import canonical_zone, zone_choices, zone_label
from tests.processes import REPO


@pytest.mark.parametrize(
    ("name", "place"),
    [
        ("Asia/Calcutta", "Asia/Kolkata"),
        ("US/Pacific", "America/Los_Angeles"),
        ("Europe/Kiev", "Europe/Kyiv"),
        ("Etc/UTC", "UTC"),
        ("Pacific/Chatham", "Pacific/Chatham"),
        ("Etc/GMT+3", "Etc/GMT+3"),
        ("Mars/Olympus_Mons", None),
        ("", None),
    ],
)
def test_a_zone_name_is_read_as_the_place_it_stands_for(name: str, place: str | None) -> None:
    assert canonical_zone(name) == place


def test_an_old_name_on_an_account_is_offered_beside_the_places() -> None:
    assert zone_choices(current="Etc/GMT+3")[:2] == [("UTC", "UTC"), ("Etc/GMT+3", "Etc/GMT+3")]
    assert [value for value, _ in zone_choices()[:2]] == ["UTC", "Africa"]


def test_a_zone_is_labelled_by_its_place() -> None:
    assert (zone_label("Pacific/Chatham"), zone_label("America/Argentina/Buenos_Aires"), zone_label("UTC")) == (
        "Chatham time",
        "Buenos Aires time",
        "UTC",
    )


def render(source: str, *, time_zone: str | None, **values: object) -> str:
    user = SimpleNamespace(time_zone=time_zone) if time_zone is not None else None
    return Template("{% load person_time %}" + source).render(Context({"user": user, **values}))


def test_a_moment_is_shown_on_the_persons_clock_with_its_zone_beside_it() -> None:
    moment = datetime(2026, 7, 1, 0, 0, tzinfo=UTC)

    html = render("{% person_time moment %}", time_zone="Pacific/Chatham", moment=moment)

    # Chatham's winter: UTC+12:45.
    assert html == (
        '<time datetime="2026-07-01T00:00:00+00:00" title="Pacific/Chatham">'
        '1 Jul 2026, 12:45 <span class="zone">Chatham time</span></time>'
    )


def test_a_day_is_the_persons_day_with_the_time_and_zone_in_its_title() -> None:
    moment = datetime(2026, 1, 14, 23, 30, tzinfo=UTC)

    html = render("{% person_date moment %}", time_zone="Pacific/Chatham", moment=moment)

    assert (
        html == '<time datetime="2026-01-14T23:30:00+00:00" title="15 Jan 2026, 13:15, Chatham time">15 Jan 2026</time>'
    )
    assert render("{% person_date day %}", time_zone="Pacific/Chatham", day=date(2026, 1, 14)) == "14 Jan 2026"


@pytest.mark.parametrize("time_zone", [None, "Nowhere/Special"])
def test_without_a_zone_to_go_by_times_are_shown_in_utc_and_say_so(time_zone: str | None) -> None:
    moment = datetime(2026, 1, 14, 23, 30, tzinfo=UTC)

    assert '14 Jan 2026, 23:30 <span class="zone">UTC</span>' in render(
        "{% person_time moment %}", time_zone=time_zone, moment=moment
    )
    assert render("{% person_zone %}", time_zone=time_zone) == "UTC"


def test_a_process_reads_the_time_zone_database_once_however_often_it_offers_the_list() -> None:
    # A fresh interpreter: the list is built as the module is imported, and never again.
    script = """
import zoneinfo
scans = 0
real = zoneinfo.available_timezones
def counted():
    global scans
    scans += 1
    return real()
zoneinfo.available_timezones = counted
from accounts.time_zones import canonical_zone, is_zone, zone_choices
at_import = scans
for _ in range(3):
    zone_choices(current="Etc/GMT+3")
    zone_choices()
    [is_zone(name) for name in ("Europe/Oslo", "US/Pacific", "Mars/Olympus_Mons")]
    [canonical_zone(name) for name in ("Asia/Calcutta", "Europe/Kiev", "Nowhere/At_All")]
print(at_import, scans)
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True)

    assert done.stdout.split() == ["1", "1"]


def test_the_offered_list_is_the_same_on_every_call_and_not_shared_for_changes() -> None:
    first = zone_choices(current="Etc/GMT+3")
    first.append(("Mars/Olympus_Mons", "Olympus Mons"))

    assert zone_choices(current="Etc/GMT+3")[-1] != ("Mars/Olympus_Mons", "Olympus Mons")
    assert zone_choices()[1:] == zone_choices(current="Etc/GMT+3")[2:]
