"""Database work from async code, giving the connection back after each step.

A reply streams for seconds while the model writes it. Holding a database connection all
that time would cap the replies in flight at the pool's size; instead each step borrows
a connection from the pool and returns it as soon as it is done.
"""

from __future__ import annotations

from collections.abc import Callable

from asgiref.sync import sync_to_async
from django.db import connection


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

    return await sync_to_async(step)()
