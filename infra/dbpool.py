"""Pooled database connections are checked before they are handed out.

When PostgreSQL restarts (a crash, a fast restart, a failover), each connection the pool
kept is one the server has closed, and the first query on it would fail. The pool runs
`connection_check` on a connection each time it hands it out, whoever asks for it: a
request's thread, a reply's database steps (infra/dbsteps.py), a Celery task. A connection
that fails the check is thrown away and another handed out instead.
"""

from __future__ import annotations

import contextlib
import select

import psycopg
from psycopg.pq import ConnStatus
from psycopg_pool import ConnectionPool


def connection_check(conn: psycopg.Connection) -> None:
    """Return quietly when `conn` may be used; raise when the server has closed it."""
    if not _server_spoke(conn):
        return
    try:
        ConnectionPool.check_connection(conn)
    except Exception:
        _check_the_others(conn)
        raise


def _server_spoke(conn: psycopg.Connection) -> bool:
    """Whether an idle connection has something to read, which means the server said
    something while no one asked: nearly always that it is closing the connection (an
    error, then the end of the stream). Looking costs no round trip, so a connection the
    server left alone is handed out without one; any other gets a real query first."""
    if conn.closed or conn.pgconn.status != ConnStatus.OK:
        return True
    poller = select.poll()  # not select.select: a busy process may hold fds past 1024
    poller.register(conn.fileno(), select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))


def _check_the_others(conn: psycopg.Connection) -> None:
    """One connection closed by the server means it went away and closed them all: check
    every idle one now (a closed one answers at once) rather than let the pool find them
    one by one, waiting longer before each try from the second on (1 s, 2 s, 4 s...): with
    nine closed connections, a request waited past the pool's 10 s timeout and failed."""
    # The pool marks each connection it hands out as its own (psycopg's `_pool`).
    pool = getattr(conn, "_pool", None)
    if isinstance(pool, ConnectionPool):
        with contextlib.suppress(Exception):  # a pool closing meanwhile has nothing to check
            pool.check()
