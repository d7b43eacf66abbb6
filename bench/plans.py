"""What PostgreSQL's plan for a statement reads: each table, by which index, and whether it
reads the table whole.

A statement is explained with sequential scans priced out (`enable_seqscan` off), so a
sequential scan left in its plan is one no index can serve. An index read with no
condition reads the whole table all the same (in the index's order), unless the index is
partial: then it reads only the rows its predicate keeps, which is what a due-list is.
bin/bench scale prints these shapes; tests/test_query_plans.py fails on a whole read of a
table that grows with people.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection

# The tables that do not grow with the people using the app: Django's own records of its
# apps, permissions and site.
FIXED_TABLES = frozenset(
    {
        "django_migrations",
        "django_content_type",
        "auth_permission",
        "auth_group",
        "auth_group_permissions",
        "django_site",
    }
)

INDEX_SCANS = ("Index Scan", "Index Only Scan", "Bitmap Index Scan")


@dataclass(frozen=True)
class Scan:
    """One read of a table in a plan."""

    node: str
    table: str
    index: str = ""
    # Whether the index is read by a condition (an Index Cond), not from end to end.
    by_condition: bool = False
    # Whether the index keeps only the rows its predicate names.
    partial: bool = False

    @property
    def whole(self) -> bool:
        """Whether it reads every row of its table."""
        if self.node == "Seq Scan":
            return True
        return not self.by_condition and not self.partial

    def __str__(self) -> str:
        if self.node == "Seq Scan":
            return f"seq scan {self.table}"
        how = "by condition" if self.by_condition else ("partial, whole" if self.partial else "WHOLE")
        return f"{self.table} by {self.index} ({how})"


def growing_tables() -> frozenset[str]:
    """Every table of the database but FIXED_TABLES: each holds rows per person, per
    person's message or email, or per sign-in."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        return frozenset(name for (name,) in cursor.fetchall()) - FIXED_TABLES


def explained(statement: str, parameters: Sequence[Any] | dict[str, Any] | None = None) -> dict[str, Any]:
    """The plan of `statement`, as EXPLAIN (FORMAT JSON) gives it, sequential scans priced
    out. Nothing is run: a write is planned, not made."""
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        try:
            cursor.execute(f"EXPLAIN (FORMAT JSON) {statement}", parameters)
            (plan,) = cursor.fetchone()
        finally:
            cursor.execute("RESET enable_seqscan")
    plan = plan if isinstance(plan, list) else json.loads(plan)
    root: dict[str, Any] = plan[0]["Plan"]
    return root


def scans(plan: dict[str, Any]) -> list[Scan]:
    """Every read of a table in `plan`, in the plan's order."""
    indexes = _indexes()
    found = []
    for node in _nodes(plan):
        kind = node["Node Type"]
        if kind == "Seq Scan":
            found.append(Scan(kind, node["Relation Name"]))
        elif kind in INDEX_SCANS:
            table, partial = indexes.get(node["Index Name"], (node.get("Relation Name", "?"), False))
            found.append(Scan(kind, table, node["Index Name"], "Index Cond" in node, partial))
    return found


def whole_reads(statement: str, parameters: Sequence[Any] | dict[str, Any] | None = None) -> list[Scan]:
    """The reads of a table that grows with people that read it whole."""
    growing = growing_tables()
    return [scan for scan in scans(explained(statement, parameters)) if scan.whole and scan.table in growing]


def explainable(statement: str) -> bool:
    """Whether EXPLAIN takes the statement (a query or a write, not a lock or a setting)."""
    return statement.lstrip().split(None, 1)[0].upper() in {"SELECT", "INSERT", "UPDATE", "DELETE", "WITH"}


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", ()):
        yield from _nodes(child)


def _indexes() -> dict[str, tuple[str, bool]]:
    """Each index's table, and whether it is partial."""
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT i.relname, t.relname, x.indpred IS NOT NULL
            FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
            JOIN pg_namespace n ON n.oid = t.relnamespace WHERE n.nspname = current_schema()"""
        )
        return {index: (table, partial) for index, table, partial in cursor.fetchall()}
