"""The reads every memory tool call and every memory write makes, written as SQL (see
infra/sql_rows.py for why). memory/selectors.py and memory/store.py say what each one
means; this says how. Each is scoped to one person, and `in_use_only` reads nothing while
that person has memory off, in the same statement."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection

from infra.sql_rows import column_list, from_row
from infra.sql_together import rows_of_each
from memory.models import Memory
from memory.policy import MemoryFacts

# The embedding (thousands of floats a row) is only ever compared in SQL: not loaded.
WITHOUT_EMBEDDING = ("embedding",)
# A match of a similarity search is shown and recorded by its id, key, tier, category and
# summary alone: the rest (the note itself, the longest text) is neither read nor decrypted.
NOT_IN_A_MATCH = tuple(
    field.name
    for field in Memory._meta.concrete_fields
    if field.name not in {"id", "key", "tier", "category", "summary"}
)


def memory_enabled_locked(*, user_id: int) -> bool:
    """Whether the person has memory on, their row locked until the transaction ends."""
    with connection.cursor() as cursor:
        cursor.execute(_sql().memory_enabled_locked, {"user_id": user_id})
        (enabled,) = cursor.fetchone()
    return enabled


def facts_of(*, user_id: int) -> list[MemoryFacts]:
    """The person's store as the eviction policy reads it: plain columns, nothing decrypted."""
    with connection.cursor() as cursor:
        cursor.execute(_sql().facts_of, {"user_id": user_id})
        return _facts(cursor.fetchall())


def memories_of(*, user_id: int) -> list[Memory]:
    """Every memory of the person, without its embedding, newest change first."""
    with connection.cursor() as cursor:
        cursor.execute(_sql().memories_of, [user_id])
        return [memory_from_row(row[1:]) for row in cursor.fetchall()]


def memories_of_sql(user_id: str) -> str:
    """memories_of's read, for a statement that reads the memories with other things
    (a turn's claim, coach/statements.py): the person is whoever `user_id` (SQL) names,
    and `newest` (1 for the newest change) gives the order, which a UNION does not keep."""
    return f"""
        SELECT row_number() OVER (ORDER BY m.updated_at DESC, m.id DESC) AS newest,
               {column_list(Memory, "m", without=WITHOUT_EMBEDDING)}
        FROM {Memory._meta.db_table} m WHERE m.user_id = {user_id}
    """  # noqa: S608 (names from the model and the caller's SQL, no values)


def memory_from_row(row: Sequence[Any]) -> Memory:
    """A memory from the columns memories_of_sql names after `newest`."""
    return from_row(Memory, row, without=WITHOUT_EMBEDDING)


def memory_keyed(*, user_id: int, digest: str, in_use_only: bool) -> Memory | None:
    """The person's memory with this key digest, without its embedding."""
    with connection.cursor() as cursor:
        cursor.execute(_sql().memory_keyed[in_use_only], {"user_id": user_id, "digest": digest})
        row = cursor.fetchone()
    return None if row is None else from_row(Memory, row, without=WITHOUT_EMBEDDING)


def store_locked(*, user_id: int, digest: str) -> tuple[bool, list[MemoryFacts], Memory | None]:
    """For a write by key: the person's row locked (memory_enabled_locked), then their store
    as facts_of reads it, and their memory with this key digest, whole, locked too; each
    read after the lock, all in one round trip."""
    parameters = {"user_id": user_id, "digest": digest}
    sql = _sql()
    enabled, facts, keyed = rows_of_each(
        [(sql.memory_enabled_locked, parameters), (sql.facts_of, parameters), (sql.memory_keyed_locked, parameters)]
    )
    return enabled[0][0], _facts(facts), from_row(Memory, keyed[0]) if keyed else None


def _facts(rows: Sequence[Sequence[Any]]) -> list[MemoryFacts]:
    return [
        MemoryFacts(ref=pk, source=source, category=category, tier=tier, updated_at=at)
        for pk, source, category, tier, at in rows
    ]


def memories_nearest(
    *,
    user_id: int,
    vector: list[float],
    model: str,
    limit: int,
    exclude_category: str | None,
    in_use_only: bool,
) -> list[tuple[Memory, float]]:
    """The person's memories embedded by `model`, nearest to `vector` first, each with its
    cosine distance; the fields NOT_IN_A_MATCH are left unread."""
    parameters = _nearest_parameters(user_id, vector, model, limit, exclude_category)
    with connection.cursor() as cursor:
        cursor.execute(_sql().memories_nearest[in_use_only], parameters)
        return _matches(cursor.fetchall())


def memory_keyed_and_nearest(
    *,
    user_id: int,
    digest: str,
    vector: list[float],
    model: str,
    limit: int,
    exclude_category: str | None,
    in_use_only: bool,
) -> tuple[Memory | None, list[tuple[Memory, float]]]:
    """memory_keyed, and memories_nearest but for that memory, in one round trip."""
    parameters = _nearest_parameters(user_id, vector, model, limit, exclude_category, exclude_digest=digest)
    sql = _sql()
    keyed, nearest = rows_of_each(
        [
            (sql.memory_keyed[in_use_only], {**parameters, "digest": digest}),
            (sql.memories_nearest[in_use_only], parameters),
        ]
    )
    return (from_row(Memory, keyed[0], without=WITHOUT_EMBEDDING) if keyed else None), _matches(nearest)


def _nearest_parameters(
    user_id: int,
    vector: list[float],
    model: str,
    limit: int,
    exclude_category: str | None,
    *,
    exclude_digest: str | None = None,
) -> dict[str, Any]:
    return {
        "vector": Memory._meta.get_field("embedding").get_db_prep_value(vector, connection),
        "user_id": user_id,
        "model": model,
        "exclude_digest": exclude_digest,
        "exclude_category": exclude_category,
        "limit": limit,
    }


def _matches(rows: Sequence[Sequence[Any]]) -> list[tuple[Memory, float]]:
    return [(from_row(Memory, row[:-1], without=NOT_IN_A_MATCH), float(row[-1])) for row in rows]


@dataclass(frozen=True)
class _Statements:
    memory_enabled_locked: str
    facts_of: str
    memories_of: str
    # By whether only a person with memory on is read.
    memory_keyed: dict[bool, str]
    memory_keyed_locked: str
    memories_nearest: dict[bool, str]


@cache
def _sql() -> _Statements:
    """The statements' text, built once from the models' tables and columns."""
    memory, user = Memory._meta.db_table, get_user_model()._meta.db_table
    in_use = {False: "", True: f"JOIN {user} u ON u.id = m.user_id AND u.memory_enabled"}
    keyed = f"SELECT {column_list(Memory, 'm', without=WITHOUT_EMBEDDING)} FROM {memory} m {{in_use}} "  # noqa: S608
    keyed += "WHERE m.user_id = %(user_id)s AND m.key_digest = %(digest)s ORDER BY m.id LIMIT 1"
    match = column_list(Memory, "m", without=NOT_IN_A_MATCH)
    nearest = f"""
        SELECT {match}, m.embedding <=> %(vector)s::vector AS distance FROM {memory} m {{in_use}}
        WHERE m.user_id = %(user_id)s AND m.embedding_model = %(model)s AND m.embedding IS NOT NULL
          AND (%(exclude_digest)s::varchar IS NULL OR m.key_digest <> %(exclude_digest)s::varchar)
          AND (%(exclude_category)s::varchar IS NULL OR m.category <> %(exclude_category)s::varchar)
        ORDER BY distance, m.id
        LIMIT %(limit)s
    """  # noqa: S608 (names from the models, values as parameters)
    return _Statements(
        memory_enabled_locked=f"SELECT memory_enabled FROM {user} WHERE id = %(user_id)s FOR UPDATE",  # noqa: S608
        facts_of=f"SELECT id, source, category, tier, updated_at FROM {memory} WHERE user_id = %(user_id)s",  # noqa: S608
        memories_of=f"SELECT * FROM ({memories_of_sql('%s')}) kept ORDER BY newest",  # noqa: S608
        memory_keyed={only: keyed.format(in_use=clause) for only, clause in in_use.items()},
        memory_keyed_locked=f"""
            SELECT {column_list(Memory, "m")} FROM {memory} m
            WHERE m.user_id = %(user_id)s AND m.key_digest = %(digest)s ORDER BY m.id LIMIT 1 FOR UPDATE
        """,  # noqa: S608 (names from the model, values as parameters)
        memories_nearest={only: nearest.format(in_use=clause) for only, clause in in_use.items()},
    )
