"""When a web process's sweep may judge a turn by its silence: only once it has itself
reached the database for as long as that silence, so an outage is not taken for deaths."""

from __future__ import annotations

import pytest

from coach import sweep
from coach.sweep import DatabaseReach


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch, settings) -> list[float]:
    settings.COACH_TURN_SILENT_SECONDS = 8.0
    settings.COACH_TURN_SWEEP_SECONDS = 2.0
    now = [1000.0]
    monkeypatch.setattr(sweep.time, "monotonic", lambda: now[0])
    return now


def sweeps(reach: DatabaseReach, clock: list[float], count: int, *, taking: float = 0.01) -> None:
    for _ in range(count):
        started = clock[0]
        clock[0] += taking
        reach.answered(started=started)
        clock[0] += 2.0 - taking


def test_a_process_judges_no_silence_until_it_has_reached_the_database_for_that_long(clock: list[float]) -> None:
    reach = DatabaseReach()
    assert reach.silent_seconds() is None
    sweeps(reach, clock, 3)
    assert reach.silent_seconds() is None
    sweeps(reach, clock, 2)
    assert reach.silent_seconds() == 8.0


def test_after_a_failed_sweep_silence_counts_again_only_after_as_long(clock: list[float]) -> None:
    reach = DatabaseReach()
    sweeps(reach, clock, 5)
    reach.failed()
    clock[0] += 20

    sweeps(reach, clock, 1)
    assert reach.silent_seconds() is None
    sweeps(reach, clock, 4)
    assert reach.silent_seconds() == 8.0


def test_a_sweep_held_up_by_a_frozen_database_starts_the_count_again(clock: list[float]) -> None:
    reach = DatabaseReach()
    sweeps(reach, clock, 5)
    sweeps(reach, clock, 1, taking=30.0)

    assert reach.silent_seconds() is None
