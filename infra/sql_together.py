"""Several statements sent to PostgreSQL at once: one round trip where there would be one
each. On a small machine a round trip costs more than a simple statement takes to run.

Each statement still runs as it would alone, in its turn. In READ COMMITTED each takes its
own snapshot as it starts, so a read sent after a lock sees what the lock waited for (a
lock and a read written as one statement would not: its snapshot is taken before the
wait). A statement that fails stops the rest, and its error is raised as for one.

It needs Django's default client-side binding of parameters: with server-side binding a
query may hold one statement only, and the statements are then sent one by one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from django.db import connection

type Rows = list[tuple[Any, ...]]


def rows_of_each(statements: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Rows]:
    """Run the statements in order, each with its named parameters, and return the rows
    of each. Statements may share a parameter's name only for the same value."""
    parameters: dict[str, Any] = {}
    for _, named in statements:
        for name, value in named.items():
            if name in parameters and parameters[name] is not value and parameters[name] != value:
                raise ValueError(f"two statements give the parameter {name!r} different values")
            parameters[name] = value
    with connection.cursor() as cursor:
        if not isinstance(cursor.cursor, psycopg.ClientCursor):
            results = []
            for sql, named in statements:
                cursor.execute(sql, named)
                results.append(_rows(cursor))
            return results
        cursor.execute(";\n".join(sql for sql, _ in statements), parameters)
        results = [_rows(cursor)]
        while cursor.nextset():
            results.append(_rows(cursor))
    if len(results) != len(statements):
        raise ValueError(f"{len(statements)} statements gave {len(results)} results: one holds a semicolon")
    return results


def _rows(cursor: Any) -> Rows:
    # A statement that returns no rows (a lock's UPDATE without RETURNING) has no description.
    return cursor.fetchall() if cursor.description is not None else []
