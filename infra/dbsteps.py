"""Database work from async code, giving the connection back after each step.

A reply streams for seconds while the model writes it. Holding a database connection all
that time would cap the replies in flight at the pool's size; instead each step borrows
a connection from the pool and returns it as soon as it is done.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection

_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def release_connection() -> None:
    """Hand this thread's connection back to the pool (never in the middle of a transaction)."""
    if not connection.in_atomic_block:
        connection.close()


async def db_step[**P, R](function: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """Run one synchronous database step from async code, then release its connection."""

    def step() -> R:
        try:
            return function(*args, **kwargs)
        finally:
            release_connection()

    # Not thread-sensitive: steps of many turns and readers run side by side, each thread
    # with its own connection from the pool, as many threads as the pool has connections.
    return await sync_to_async(step, thread_sensitive=False, executor=_steps_executor())()


def _steps_executor() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            size = settings.DATABASES["default"].get("OPTIONS", {}).get("pool", {}).get("max_size", 20)
            _executor = ThreadPoolExecutor(max_workers=size, thread_name_prefix="db-step")
        return _executor


async def release_request_connection() -> None:
    """Give back the connection a request's own thread took (for its login and session)
    before the request goes on for long, as a stream does: otherwise it is held until the
    response ends, and a hundred open streams would need a hundred connections."""
    await sync_to_async(release_connection)()
