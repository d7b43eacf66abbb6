"""Whether the services the app stands on answer: used by /healthz and at start-up."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import psycopg
import redis
from django.db import connection

SERVICE_TIMEOUT_SECONDS = 3


def first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


def postgres_problem(url: str) -> str | None:
    """Connect afresh to the database at `url`; None when it answers."""
    try:
        with psycopg.connect(url, connect_timeout=SERVICE_TIMEOUT_SECONDS) as conn:
            conn.execute("SELECT 1")
    except Exception as error:  # any failure at all means "does not answer"
        return first_line(error)
    return None


def redis_problem(url: str) -> str | None:
    """PING the Redis server at `url`; None when it answers."""
    try:
        client = redis.Redis.from_url(
            url, socket_connect_timeout=SERVICE_TIMEOUT_SECONDS, socket_timeout=SERVICE_TIMEOUT_SECONDS
        )
        try:
            client.ping()
        finally:
            client.close()
    except Exception as error:
        return first_line(error)
    return None


def database_problem() -> str | None:
    """Ask the app's own database connection, the one requests use, then give it back.
    A database that answers but refuses writes (a hot standby, or one set read-only) is a
    problem too: every form that saves would fail."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_is_in_recovery(), current_setting('transaction_read_only') = 'on'")
            in_recovery, read_only = cursor.fetchone()
    except Exception as error:
        return first_line(error)
    finally:
        # Back to the pool (or, if it broke, away): never kept by a health-check thread.
        connection.close()
    if in_recovery:
        return "read-only: it refuses writes (a hot standby, in recovery)"
    if read_only:
        return "read-only: it refuses writes (default_transaction_read_only is on)"
    return None


@dataclass
class _Service:
    """Where one service's checks run: a thread of its own, and the check it is on."""

    thread: concurrent.futures.ThreadPoolExecutor
    running: concurrent.futures.Future[str | None] | None = None
    asked_at: float = 0.0


_services: dict[str, _Service] = {}
_services_lock = threading.Lock()


def problems_within(checks: dict[str, Callable[[], str | None]], seconds: float) -> dict[str, str]:
    """Run the checks side by side; what each that failed, or did not answer within
    `seconds`, says. Returns in about `seconds` at most, whatever hangs.

    Each service is checked on a thread of its own, so a hang in one never delays
    another's answer. A check that has not answered since an earlier call is waited on
    again, never started a second time behind it: however often a load balancer asks
    while a service hangs, the threads stuck on it stay one."""
    asked = {name: _ask(name, check) for name, check in checks.items()}
    concurrent.futures.wait([future for future, _ in asked.values()], timeout=seconds)
    problems = {}
    for name, (future, asked_at) in asked.items():
        if future.done():
            if (problem := future.result()) is not None:
                problems[name] = problem
        elif asked_at is None:
            problems[name] = f"no answer within {seconds:g} s"
        else:
            problems[name] = f"still no answer, {time.monotonic() - asked_at:.0f} s after it was first asked"
    return problems


def _ask(name: str, check: Callable[[], str | None]) -> tuple[concurrent.futures.Future[str | None], float | None]:
    """The check of the service `name`, started now on the service's own thread; or, while
    one an earlier call started has not answered, that one and when it was asked."""
    with _services_lock:
        service = _services.get(name)
        if service is None:
            thread = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"health-{name}")
            service = _services[name] = _Service(thread)
        if service.running is not None and not service.running.done():
            return service.running, service.asked_at
        service.running = service.thread.submit(check)
        service.asked_at = time.monotonic()
        return service.running, None
