"""Counting every SQL statement a benchmark's code makes, in whichever thread it runs."""

from __future__ import annotations

import threading

from django.db.backends import utils as db_utils


class QueryCounter:
    """Counts the SQL statements of every thread (a turn or a plan runs in several)."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()
        original = db_utils.CursorWrapper.execute

        def execute(cursor: db_utils.CursorWrapper, sql: str, params: object = None) -> object:
            with self._lock:
                self.count += 1
            return original(cursor, sql, params)

        db_utils.CursorWrapper.execute = execute
