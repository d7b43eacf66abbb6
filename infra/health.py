"""Whether the services the app stands on answer: used by /healthz and at start-up."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable

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
    """Ask the app's own database connection, the one requests use, then give it back."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as error:
        return first_line(error)
    finally:
        # Back to the pool (or, if it broke, away): never kept by a health-check thread.
        connection.close()
    return None


# Few threads: when a service hangs, checks queue behind the stuck ones and time out too,
# rather than piling up a thread per request.
_checks = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="health")


def problems_within(checks: dict[str, Callable[[], str | None]], seconds: float) -> dict[str, str]:
    """Run the checks side by side; what each that failed, or did not answer within
    `seconds`, says. Returns in about `seconds` at most, whatever hangs."""
    futures = {name: _checks.submit(check) for name, check in checks.items()}
    concurrent.futures.wait(futures.values(), timeout=seconds)
    problems = {}
    for name, future in futures.items():
        if not future.done():
            problems[name] = f"no answer within {seconds:g} s"
        elif (problem := future.result()) is not None:
            problems[name] = problem
    return problems
