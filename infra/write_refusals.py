"""A database that cannot take a write, and why.

- **Read-only**: a hot standby after a failover, or one set read-only
  (`default_transaction_read_only`). It answers every read; every INSERT, UPDATE, DELETE
  and SELECT ... FOR UPDATE fails with ReadOnlySqlTransaction (SQLSTATE 25006).
- **Disk full**: a write that needs new space on disk fails with DiskFull (53100); what
  fits in the pages a table already has still goes in, and every read answers.
- **Out of connections**: the server takes no new session ("sorry, too many clients
  already"), so this process's pool cannot hand one out in time (PoolTimeout); nor can it
  when every connection it may open is in use.
"""

from __future__ import annotations

import psycopg
from psycopg.errors import DiskFull, ReadOnlySqlTransaction, TooManyConnections
from psycopg_pool import PoolTimeout

READ_ONLY = "read-only"
DISK_FULL = "disk full"
OUT_OF_CONNECTIONS = "out of connections"
# How the server words a session it refuses for want of slots: it sends no SQLSTATE a
# client can read before the session exists.
_NO_SLOTS = ("too many clients already", "remaining connection slots are reserved")


def why_writes_refused(error: BaseException) -> str | None:
    """READ_ONLY, DISK_FULL or OUT_OF_CONNECTIONS when `error`, or an error it was raised
    from or while handling, is the database unable to take a write; None otherwise.
    Django raises its own error from the driver's, and a service may raise its own from
    Django's: the reason is somewhere down that chain."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, ReadOnlySqlTransaction):
            return READ_ONLY
        if isinstance(current, DiskFull):
            return DISK_FULL
        if isinstance(current, PoolTimeout | TooManyConnections) or (
            isinstance(current, psycopg.OperationalError) and any(words in str(current) for words in _NO_SLOTS)
        ):
            return OUT_OF_CONNECTIONS
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def refuses_writes(error: BaseException) -> bool:
    """Whether `error` is the database unable to take a write (see why_writes_refused)."""
    return why_writes_refused(error) is not None
