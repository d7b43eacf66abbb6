"""Timing one operation of a benchmark, with the queries of one call of it."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from django.db import connection, reset_queries
from django.test.utils import CaptureQueriesContext


def measure(
    operation: Callable[[int], None], runs: int, *, after: Callable[[], None] = lambda: None
) -> tuple[float, float, int]:
    """p50 and p95 in milliseconds, and the queries of one call; `after` runs untimed after each."""
    operation(-1)  # warm caches and connections
    after()
    reset_queries()  # the debug query log is capped: counting needs room in it
    with CaptureQueriesContext(connection) as queries:
        operation(-2)
    after()
    timings = []
    for run in range(runs):
        started = time.perf_counter()
        operation(run)
        timings.append((time.perf_counter() - started) * 1000)
        after()
    timings.sort()
    return statistics.median(timings), timings[int(len(timings) * 0.95) - 1], len(queries)
