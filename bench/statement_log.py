"""Every SQL statement the app makes, in whichever thread, named by the app's function that
made it, with its time, its text and its parameters (to explain it afterwards).

Statements are told apart by that function and their text, with the lengths of lists
(`IN (%s, %s, ...)`) folded, so one statement asked for two ids and for three is one.
"""

from __future__ import annotations

import re
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from django.db.backends import utils as db_utils

ROOT = Path(__file__).resolve().parent.parent
APP_PACKAGES = ("accounts", "emails", "coach", "memory", "infra")
# Mechanism, not meaning: the function that called these is the statement's name.
PASSED_THROUGH = ("infra/rows.py", "infra/dbsteps.py", "infra/dbpool.py")
_LISTS = re.compile(r"\((?:%s, )+%s\)")
_FIRST_TABLE = re.compile(r'\b(?:FROM|UPDATE|INTO)\s+"?(\w+)"?', re.IGNORECASE)


@dataclass
class Statement:
    name: str
    sql: str
    parameters: Any
    milliseconds: list[float] = field(default_factory=list)

    @property
    def p50(self) -> float:
        return statistics.median(self.milliseconds)

    @property
    def verb(self) -> str:
        words = self.sql.split(None, 1)
        return words[0].upper() if words else "?"


class StatementLog:
    """Records while `recording()` is open; `statements` keeps each one's times."""

    def __init__(self) -> None:
        self.statements: dict[tuple[str, str], Statement] = {}
        self._lock = threading.Lock()

    @contextmanager
    def recording(self) -> Iterator[None]:
        """Every statement made meanwhile, in any thread, is recorded."""
        original, original_many = db_utils.CursorWrapper.execute, db_utils.CursorWrapper.executemany

        def execute(cursor: db_utils.CursorWrapper, sql: str, params: Any = None) -> Any:
            started = time.perf_counter()
            try:
                return original(cursor, sql, params)
            finally:
                self._add(sql, params, (time.perf_counter() - started) * 1000)

        def executemany(cursor: db_utils.CursorWrapper, sql: str, param_list: Any) -> Any:
            listed = list(param_list)
            started = time.perf_counter()
            try:
                return original_many(cursor, sql, listed)
            finally:
                # Explained with the first row's values: each row is the same statement.
                self._add(sql, listed[0] if listed else None, (time.perf_counter() - started) * 1000)

        db_utils.CursorWrapper.execute = execute  # type: ignore[method-assign]
        db_utils.CursorWrapper.executemany = executemany  # type: ignore[method-assign]
        try:
            yield
        finally:
            db_utils.CursorWrapper.execute = original  # type: ignore[method-assign]
            db_utils.CursorWrapper.executemany = original_many  # type: ignore[method-assign]

    def clear(self) -> None:
        with self._lock:
            self.statements = {}

    def _add(self, sql: Any, params: Any, milliseconds: float) -> None:
        if not isinstance(sql, str):
            return
        text = _LISTS.sub("(...)", sql)
        name = _made_by(sys._getframe(2))
        with self._lock:
            statement = self.statements.setdefault((name, text), Statement(name, sql, params))
            statement.milliseconds.append(milliseconds)


def label(statement: Statement) -> str:
    """The function that made it, what it does and to which table first."""
    found = _FIRST_TABLE.search(statement.sql)
    return f"{statement.name} ({statement.verb} {found.group(1) if found else '?'})"


def _made_by(frame: Any) -> str:
    """The innermost frame of the app's own code, as `module.function`."""
    while frame is not None:
        module = _app_module(frame.f_code.co_filename)
        if module:
            return f"{module}.{frame.f_code.co_name}"
        frame = frame.f_back
    return "?"


@cache
def _app_module(filename: str) -> str:
    """The app module a file is, or "" for anything else (Django, the mechanism above)."""
    try:
        path = Path(filename).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return ""
    if path.split("/", 1)[0] not in APP_PACKAGES or path in PASSED_THROUGH:
        return ""
    return path.removesuffix(".py").replace("/", ".")
