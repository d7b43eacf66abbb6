"""The reads and writes every memory tool call makes, written as SQL where it pays
(infra/rows.py says why; bench/statements.py measures each path against the ORM: a coach's
save through its tool, 10.3 ms in SQL against 21.8 ms by the ORM). Searches are
memory/retrieval.py's. memory/selectors.py and memory/store.py say what each one means; this says how.
Each is scoped to one person, and `in_use_only` reads nothing while that person has
memory off, in the same statement."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from django.contrib.auth import get_user_model
from django.db import connection
from psycopg import sql

from infra.rows import columns, from_row, insert_columns, insert_parameters, insert_placeholders, saved_as, table, text
from memory.models import Memory, MemoryEvent
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
    return bool(enabled)


def facts_of(*, user_id: int) -> list[MemoryFacts]:
    """The person's store as the eviction policy reads it: plain columns, nothing decrypted."""
    with connection.cursor() as cursor:
        cursor.execute(_sql().facts_of, {"user_id": user_id})
        return [
            MemoryFacts(ref=pk, source=source, category=category, tier=tier, updated_at=at)
            for pk, source, category, tier, at in cursor.fetchall()
        ]


def memory_keyed(*, user_id: int, digest: str, in_use_only: bool = False, locked: bool = False) -> Memory | None:
    """The person's memory with this key digest: without its embedding, or (`locked`) whole
    and locked until the transaction ends."""
    statement = _sql().memory_keyed_locked if locked else _sql().memory_keyed[in_use_only]
    with connection.cursor() as cursor:
        cursor.execute(statement, {"user_id": user_id, "digest": digest})
        row = cursor.fetchone()
    if row is None:
        return None
    return from_row(Memory, row) if locked else from_row(Memory, row, without=WITHOUT_EMBEDDING)


def memory_with_event_insert(memory: Memory, event: MemoryEvent) -> None:
    """Insert a new memory and the event recording it in one statement, as two saves would;
    both get their ids, the event its memory's."""
    parameters = {**insert_parameters(memory), **insert_parameters(event, prefix="event")}
    with connection.cursor() as cursor:
        cursor.execute(_sql().memory_with_event_insert, parameters)
        memory_pk, event_pk = cursor.fetchone()
    saved_as(memory, memory_pk)
    event.memory_id = memory_pk
    saved_as(event, event_pk)


@dataclass(frozen=True)
class _Statements:
    memory_enabled_locked: str
    facts_of: str
    # By whether only a person with memory on is read.
    memory_keyed: dict[bool, str]
    memory_keyed_locked: str
    memory_with_event_insert: str


@cache
def _sql() -> _Statements:
    """The statements' text, composed once from the models' tables and columns."""
    memory, people = table(Memory), table(get_user_model())
    in_use = {
        False: sql.SQL(""),
        True: sql.SQL("JOIN {people} u ON u.id = m.user_id AND u.memory_enabled").format(people=people),
    }
    keyed = sql.SQL(
        "SELECT {columns} FROM {memory} m {in_use} WHERE m.user_id = %(user_id)s AND m.key_digest = %(digest)s "
        "ORDER BY m.id LIMIT 1"
    )
    memory_with_event = sql.SQL(
        """WITH linked AS (
            INSERT INTO {memory} ({memory_columns}) VALUES ({memory_values}) RETURNING id
        )
        INSERT INTO {events} ({event_columns}) SELECT {event_values} FROM linked
        RETURNING memory_id, id"""
    ).format(
        memory=memory,
        memory_columns=insert_columns(Memory),
        memory_values=insert_placeholders(Memory),
        events=table(MemoryEvent),
        event_columns=insert_columns(MemoryEvent),
        # The event's memory_id is the memory's new id.
        event_values=insert_placeholders(MemoryEvent, "event", linked="memory_id"),
    )
    return _Statements(
        memory_enabled_locked=text(
            sql.SQL("SELECT memory_enabled FROM {people} WHERE id = %(user_id)s FOR UPDATE").format(people=people)
        ),
        facts_of=text(
            sql.SQL("SELECT id, source, category, tier, updated_at FROM {memory} WHERE user_id = %(user_id)s").format(
                memory=memory
            )
        ),
        memory_keyed={
            only: text(
                keyed.format(columns=columns(Memory, "m", without=WITHOUT_EMBEDDING), memory=memory, in_use=clause)
            )
            for only, clause in in_use.items()
        },
        memory_keyed_locked=text(
            sql.SQL("{keyed} FOR UPDATE").format(
                keyed=keyed.format(columns=columns(Memory, "m"), memory=memory, in_use=in_use[False])
            )
        ),
        memory_with_event_insert=text(memory_with_event),
    )
