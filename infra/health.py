"""Whether the services the app stands on answer: used by /healthz and at start-up."""

from __future__ import annotations

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
    """Ask the app's own database connection, the one requests use."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as error:
        # A dead persistent connection must not be reused by the next request.
        connection.close()
        return first_line(error)
    return None
