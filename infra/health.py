"""Whether the services the app stands on answer: used by /healthz and at start-up."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
import redis
from django.db import connection
from psycopg_pool import ConnectionPool, PoolTimeout

from infra.write_refusals import DISK_FULL, OUT_OF_CONNECTIONS, READ_ONLY, why_writes_refused

SERVICE_TIMEOUT_SECONDS = 3
# How long the check waits for a connection from the process's pool (/healthz answers
# within 1.5 s): longer, and every connection the process may hold is in use.
POOL_WAIT_SECONDS = 1.0


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
    """Whether the app's database can take a write, asked as requests ask it: a connection
    from the process's own pool, then a write that needs new space on disk (a temporary
    table's first row, rolled back: it leaves nothing). Named when it cannot: read-only (a
    hot standby, or one set read-only), its disk full, or out of connections (the server
    takes no new one, or every one this process may hold is in use); or what failed."""
    pool = getattr(connection, "pool", None)
    if not isinstance(pool, ConnectionPool):
        return _problem_of_a_fresh_connection()
    # Opening is what Django does before its first connection; opening again does nothing.
    pool.open()
    try:
        with pool.connection(timeout=POOL_WAIT_SECONDS) as conn:
            return _write_refused(conn)
    except PoolTimeout:
        return _why_no_connection(pool)
    except Exception as error:
        return _described(error)


def _write_refused(conn: psycopg.Connection[Any]) -> str | None:
    with conn.transaction(force_rollback=True):
        row = conn.execute("SELECT pg_is_in_recovery(), current_setting('transaction_read_only') = 'on'").fetchone()
        in_recovery, read_only = row if row is not None else (False, False)
        if in_recovery:
            return f"{READ_ONLY}: it refuses writes (a hot standby, in recovery)"
        if read_only:
            return f"{READ_ONLY}: it refuses writes (default_transaction_read_only is on)"
        # A table made now has no page yet: its first row needs new space, as a growing
        # table's next page does, where a row that fits an old page would not.
        conn.execute("CREATE TEMPORARY TABLE health_write_probe (written integer) ON COMMIT DROP")
        conn.execute("INSERT INTO health_write_probe VALUES (1)")
    return None


def _why_no_connection(pool: ConnectionPool) -> str:
    """The pool had no connection to give within POOL_WAIT_SECONDS: whether the server takes
    no more, or this process holds all it may, learned from one connection of the check's own."""
    stats = pool.get_stats()
    fresh = _problem_of_a_fresh_connection()
    if fresh is not None:
        return fresh
    return (
        f"{OUT_OF_CONNECTIONS}: all {stats.get('pool_size', '?')} of this process's connections are in use "
        f"({stats.get('requests_waiting', 0)} requests waiting)"
    )


def _problem_of_a_fresh_connection() -> str | None:
    params = {**connection.get_connection_params(), "connect_timeout": SERVICE_TIMEOUT_SECONDS}
    params.pop("pool", None)
    try:
        with psycopg.connect(**params) as conn:
            return _write_refused(conn)
    except Exception as error:
        return _described(error)


def _described(error: BaseException) -> str:
    """What failed, named by what it means for writes where it means one of those."""
    why = why_writes_refused(error)
    if why == DISK_FULL:
        return f"{DISK_FULL}: it cannot write ({first_line(error)})"
    if why == OUT_OF_CONNECTIONS:
        return f"{OUT_OF_CONNECTIONS}: the server takes no new ones ({first_line(error)})"
    return first_line(error)


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
