"""What PostgreSQL reads to run a statement: each table, by which index, how many of its
rows, and whether that is the table whole.

A statement is run under EXPLAIN ANALYZE in a transaction that is rolled back (a write is
made, counted, and undone), so what is counted is what it read, not what the planner
guessed. A scan reads its table whole when it is a sequential scan, or when it reads at
least WHOLE_SHARE of the table's rows (and at least MIN_ROWS): an index read by a
condition that keeps most rows (`id > 0`) is a whole read all the same. A partial index
read through (a due-list) reads only the rows its predicate keeps, which is what nothing to
do should cost.

Small databases are planned as large ones (PRICED_OUT): no sequential scan, no join that
reads both its sides whole, each row read at a high price, where a small database would
rather read its few rows whole; then a sequential scan left in a plan is one no index can
serve. bin/bench scale prints these reads as the database plans them at 10 and at 10,000
people; tests/test_query_plans.py fails on a whole read of a table that grows with people.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

# The tables that do not grow with the people using the app: Django's own records of its
# apps, permissions and site, and how far each planner has read the summaries.
FIXED_TABLES = frozenset(
    {
        "django_migrations",
        "django_content_type",
        "auth_permission",
        "auth_group",
        "auth_group_permissions",
        "django_site",
        "memory_readuntil",
    }
)
# A read of this share of a table's rows, or more, reads it whole; fewer than MIN_ROWS never.
WHOLE_SHARE = 0.1
MIN_ROWS = 50
INDEX_SCANS = ("Index Scan", "Index Only Scan", "Bitmap Index Scan")
# What a small database's plan is made with to be planned as a large one's: every row
# read costs as much as a page does by default (0.005 and 0.01 are the defaults).
PRICED_OUT = {
    "enable_seqscan": "off",
    "enable_hashjoin": "off",
    "enable_mergejoin": "off",
    "cpu_index_tuple_cost": "1",
    "cpu_tuple_cost": "1",
}


@dataclass(frozen=True)
class Scan:
    """One read of a table in a statement's run."""

    node: str
    table: str
    index: str
    partial: bool
    rows_read: float
    table_rows: float

    @property
    def whole(self) -> bool:
        """Whether it reads every row of its table, or near enough."""
        if self.node == "Seq Scan":
            return True
        return self.rows_read >= max(MIN_ROWS, WHOLE_SHARE * self.table_rows)

    def __str__(self) -> str:
        how = "seq scan" if self.node == "Seq Scan" else f"by {self.index}{' (partial)' if self.partial else ''}"
        whole = ", WHOLE" if self.whole else ""
        return f"{self.table} {how}: {self.rows_read:,.0f} of {self.table_rows:,.0f} rows{whole}"


class _RolledBack(Exception):
    pass


def growing_tables() -> frozenset[str]:
    """Every table of the database but FIXED_TABLES: each holds rows per person, per
    person's message or email, or per sign-in."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        return frozenset(name for (name,) in cursor.fetchall()) - FIXED_TABLES


def reads(
    statement: str, parameters: Sequence[Any] | dict[str, Any] | None = None, *, priced_out: bool = True
) -> list[Scan]:
    """Every read of a table the statement makes when run now, planned as a large database
    would be (`priced_out`) or as this one is; undone whatever it wrote."""
    plan: dict[str, Any] = {}
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            if priced_out:
                for setting, value in PRICED_OUT.items():
                    cursor.execute(f"SET LOCAL {setting} = {value}")
            cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", parameters)
            (found,) = cursor.fetchone()
            plan = (found if isinstance(found, list) else json.loads(found))[0]["Plan"]
            raise _RolledBack
    except _RolledBack:
        pass
    return _scans(plan)


def whole_reads(statement: str, parameters: Sequence[Any] | dict[str, Any] | None = None) -> list[Scan]:
    """The reads of a table that grows with people that read it whole."""
    growing = growing_tables()
    return [scan for scan in reads(statement, parameters) if scan.whole and scan.table in growing]


def explainable(statement: str) -> bool:
    """Whether EXPLAIN takes the statement (a query or a write, not a lock or a setting)."""
    return statement.lstrip().split(None, 1)[0].upper() in {"SELECT", "INSERT", "UPDATE", "DELETE", "WITH"}


def _scans(plan: dict[str, Any]) -> list[Scan]:
    indexes, sizes = _indexes(), _sizes()
    found = []
    for node in _nodes(plan):
        kind = node["Node Type"]
        loops = node.get("Actual Loops", 1)
        read = (node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)) * loops
        if kind == "Seq Scan":
            table = node["Relation Name"]
            found.append(Scan(kind, table, "", False, read, sizes.get(table, 0)))
        elif kind in INDEX_SCANS:
            table, partial = indexes.get(node["Index Name"], (node.get("Relation Name", "?"), False))
            found.append(Scan(kind, table, node["Index Name"], partial, read, sizes.get(table, 0)))
    return found


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if not node:
        return
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


def _sizes() -> dict[str, float]:
    """Each table's rows, as its statistics last counted them."""
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT c.relname, greatest(c.reltuples, 0) FROM pg_class c
            JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'r'"""
        )
        return {table: float(rows) for table, rows in cursor.fetchall()}
