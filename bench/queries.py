"""Counting every SQL statement a benchmark's code makes, in whichever thread it runs."""

from __future__ import annotations

import threading

from django.db.backends import utils as db_utils

# What sets a turn's heartbeat and nothing else (coach/claims.py: turn_heartbeat).
HEARTBEAT = 'SET "heartbeat_at" = '


class QueryCounter:
    """Counts the SQL statements of every thread (a turn or a plan runs in several), in all
    and by the kind of thread that made them: a chat turn's steps run in `db-step` threads,
    everything else (the requests) elsewhere."""

    def __init__(self) -> None:
        self.count = 0
        self.in_steps = 0
        # A running turn's heartbeat comes every COACH_TURN_HEARTBEAT_SECONDS of real time:
        # counted apart, so the figures follow the persona and the seed, not the machine.
        self.heartbeats = 0
        self._lock = threading.Lock()
        original = db_utils.CursorWrapper.execute

        def execute(cursor: db_utils.CursorWrapper, sql: str, params: object = None) -> object:
            with self._lock:
                # Composed statements (psycopg.sql) pass through uncounted as heartbeats.
                if isinstance(sql, str) and sql.startswith("UPDATE") and HEARTBEAT in sql:
                    self.heartbeats += 1
                else:
                    self.count += 1
                    self.in_steps += threading.current_thread().name.startswith("db-step")
            return original(cursor, sql, params)

        db_utils.CursorWrapper.execute = execute
