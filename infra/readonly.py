"""A database that refuses writes: a hot standby after a failover, or one set read-only
(`default_transaction_read_only`). It answers every read; every INSERT, UPDATE, DELETE and
SELECT ... FOR UPDATE fails with ReadOnlySqlTransaction (SQLSTATE 25006)."""

from __future__ import annotations

from psycopg.errors import ReadOnlySqlTransaction


def refuses_writes(error: BaseException) -> bool:
    """Whether `error`, or an error it was raised from or while handling, is the database
    refusing a write. Django raises its own error from the driver's, and a service may
    raise its own from Django's: the refusal is somewhere down that chain."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, ReadOnlySqlTransaction):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
