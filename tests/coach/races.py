"""Two database transactions made to meet: the second arrives while the first holds its
lock, and the first finishes only once PostgreSQL shows the second waiting on it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from django.db import connection


def sessions_waiting_on_a_lock() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        return cursor.fetchone()[0]


def race(
    first: Callable[[], None], second: Callable[[], None], *, holding: threading.Event, release: threading.Event
) -> None:
    """Run `first` until it sets `holding` (its lock taken, its transaction open), then
    `second`; once the second waits on the first's lock, set `release` and wait for both.
    Each runs in a thread of its own, with a connection of its own."""

    def own_connection(work: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                work()
            finally:
                connection.close()

        return run

    ahead = threading.Thread(target=own_connection(first))
    ahead.start()
    assert holding.wait(10), "the first transaction never took its lock"
    behind = threading.Thread(target=own_connection(second))
    behind.start()
    deadline = time.monotonic() + 10
    while sessions_waiting_on_a_lock() == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sessions_waiting_on_a_lock() == 1, "the second transaction does not wait for the first"
    release.set()
    ahead.join(10)
    behind.join(10)
