"""Several statements sent to PostgreSQL at once: one round trip where there would be one
each. On a small machine a round trip costs more than a simple statement takes to run.

Each statement runs in its turn. In READ COMMITTED each takes its own snapshot as it
starts, so a read sent after a lock sees what the lock waited for (a lock and a read
written as one statement would not: its snapshot is taken before the wait). A statement
that fails stops the rest, and its error is raised as for one. Outside a transaction,
PostgreSQL runs the batch as one: all of it or none, its locks held to its end (sent one
by one, each would commit on its own).

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
    if not statements:
        return []
    parameters: dict[str, Any] = {}
    for _, named in statements:
        for name, value in named.items():
            if name in parameters and parameters[name] is not value and parameters[name] != value:
                raise ValueError(f"two statements give the parameter {name!r} different values")
            parameters[name] = value
    with connection.cursor() as cursor:
        if not isinstance(cursor.cursor, psycopg.ClientCursor):
            results = []
            for sql, _ in statements:
                # The parameters of all, as in one query: a statement may use another's.
                cursor.execute(sql, parameters)
                results.append(_rows(cursor))
            return results
        cursor.execute(";\n".join(sql for sql, _ in statements), parameters)
        results = [_rows(cursor)]
        while cursor.nextset():
            results.append(_rows(cursor))
    if len(results) != len(statements):
        raise ValueError(f"{len(statements)} statements gave {len(results)} results: is one of them two?")
    return results


def _rows(cursor: Any) -> Rows:
    # A statement that returns no rows (a lock's UPDATE without RETURNING) has no description.
    return cursor.fetchall() if cursor.description is not None else []
