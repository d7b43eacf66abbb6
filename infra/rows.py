"""Model rows for the few statements written as SQL: the columns to name, the values to
write, and model instances made from what comes back, all taken from the models.

The ORM compiles every query on every call: on a small machine about a millisecond of CPU
each, several times what PostgreSQL takes to answer a simple one (bench/statements.py
measures each path written as SQL against its ORM equivalent). Where that pays, a
statement is written as SQL, composed with psycopg.sql from these helpers: its columns,
how each value is prepared (encryption included) and how each is read back (decryption
included) come from the model, so a column added to a model is read and written by every
statement without a change to it.

Only Django's public API: the model's `_meta` for its fields, each field's own
`from_db_value`, `pre_save`, `get_db_prep_save` and `db_type`, and `Model.from_db` for the
instances made, so an upgrade of Django changes none of it unannounced.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import AutoField, CharField, Field, Model
from psycopg import sql


def table(model: type[Model]) -> sql.Identifier:
    return sql.Identifier(model._meta.db_table)


def columns(model: type[Model], alias: str, *, without: tuple[str, ...] = ()) -> sql.Composed:
    """Every stored column of `model` but those `without` names, as `alias.column`, in the
    order `from_row` reads."""
    return sql.SQL(", ").join([sql.Identifier(alias, _column(field)) for field in stored_fields(model, without)])


def column_count(model: type[Model], *, without: tuple[str, ...] = ()) -> int:
    return len(stored_fields(model, without))


def from_row[M: Model](model: type[M], values: Sequence[Any], *, without: tuple[str, ...] = ()) -> M:
    """An instance of `model` from its columns as `columns` named them, each value
    converted as the ORM converts it (decrypted, made aware, ...); the fields `without`
    names are deferred, as `.defer()` leaves them."""
    reading = _reading(model, without)
    if len(values) != len(reading.attnames):
        raise ValueError(f"{model.__name__} has {len(reading.attnames)} columns to read, the row {len(values)}")
    connection = connections[DEFAULT_DB_ALIAS]
    converted = list(values)
    for index, field, convert in reading.converters:
        # The field stands for the expression it was read by: each is a plain column of it.
        converted[index] = convert(converted[index], field, connection)
    return model.from_db(DEFAULT_DB_ALIAS, reading.attnames, converted)


def insert_columns(model: type[Model]) -> sql.Composed:
    """The columns an insert names: all but the generated primary key."""
    return sql.SQL(", ").join([sql.Identifier(_column(field)) for field in _insert_fields(model)])


def insert_placeholders(model: type[Model], prefix: str = "insert") -> sql.Composed:
    """Placeholders for `insert_columns`, each cast to its column's type: a value that
    reaches an insert through a SELECT is not typed by the column it lands in. Text is cast
    without its length, so one too long fails on the column, as through the ORM, rather
    than being cut short by the cast."""
    return sql.SQL(", ").join(
        sql.SQL("{}::{}").format(sql.Placeholder(f"{prefix}_{index}"), sql.SQL(_cast_type(field)))
        for index, field in enumerate(_insert_fields(model))
    )


def insert_parameters(instance: Model, prefix: str = "insert") -> dict[str, Any]:
    """The instance's values for `insert_placeholders`, prepared as a save prepares them
    (encrypted where the field encrypts)."""
    connection = connections[DEFAULT_DB_ALIAS]
    return {
        f"{prefix}_{index}": field.get_db_prep_save(field.pre_save(instance, add=True), connection)
        for index, field in enumerate(_insert_fields(type(instance)))
    }


def saved[M: Model](instance: M, pk: int) -> M:
    """The instance written by SQL (its values prepared by `insert_parameters`), as the
    database now holds it under `pk`: a new instance, made as a read makes one, so Django
    knows it saved. Relations set on `instance` are not carried over: set them again."""
    model = type(instance)
    fields = stored_fields(model)
    values = [pk if field.primary_key else getattr(instance, field.attname) for field in fields]
    return model.from_db(DEFAULT_DB_ALIAS, [field.attname for field in fields], values)


def update_assignments(instance: Model, field_names: Sequence[str], prefix: str) -> tuple[sql.Composed, dict[str, Any]]:
    """`column = placeholder, ...` for the named fields of a saved instance, and their
    values, prepared as `save(update_fields=...)` prepares them (an `auto_now` field set
    to now, as a save sets it)."""
    connection = connections[DEFAULT_DB_ALIAS]
    assignments: list[sql.Composed] = []
    parameters: dict[str, Any] = {}
    for index, name in enumerate(field_names):
        field = instance._meta.get_field(name)
        if not isinstance(field, Field):
            raise TypeError(f"{type(instance).__name__}.{name} is a relation of another model's, not a column")
        placeholder = f"{prefix}_{index}"
        # The column types what is assigned to it: no cast (which would cut text short).
        assignments.append(sql.SQL("{} = {}").format(sql.Identifier(_column(field)), sql.Placeholder(placeholder)))
        parameters[placeholder] = field.get_db_prep_save(field.pre_save(instance, add=False), connection)
    return sql.SQL(", ").join(assignments), parameters


def text(statement: sql.Composable) -> str:
    """A composed statement as the text Django's cursor takes (compose it once: cache it)."""
    return statement.as_string()


def _column(field: Field[Any, Any]) -> str:
    # Every field stored in a row has its column; the types allow None for those that are not.
    if field.column is None:
        raise TypeError(f"{field} has no column")
    return field.column


def _cast_type(field: Field[Any, Any]) -> str:
    if isinstance(field, CharField):
        # PostgreSQL's text, not the column's varchar(n): a cast to varchar(n) silently cuts
        # a longer value to n characters, where the column itself refuses it, as it does
        # what the ORM saves. (PostgreSQL is the one database the app runs on.)
        return "text"
    cast_type = field.db_type(connections[DEFAULT_DB_ALIAS])
    if cast_type is None:
        raise TypeError(f"{field} has no column type")
    return cast_type


@cache
def stored_fields(model: type[Model], without: tuple[str, ...] = ()) -> tuple[Field[Any, Any], ...]:
    return tuple(field for field in model._meta.concrete_fields if field.name not in without)


@cache
def _insert_fields(model: type[Model]) -> tuple[Field[Any, Any], ...]:
    # AutoField stands for every auto-incremented kind (BigAutoField, SmallAutoField).
    return tuple(field for field in stored_fields(model) if not isinstance(field, AutoField))


@dataclass(frozen=True)
class _Reading:
    attnames: list[str]
    # Only the columns whose fields convert what the database returns (most do not: on
    # PostgreSQL the driver returns each type as Django reads it), by their place in a row.
    converters: tuple[tuple[int, Field[Any, Any], Callable[[Any, Any, Any], Any]], ...]


@cache
def _reading(model: type[Model], without: tuple[str, ...]) -> _Reading:
    fields = stored_fields(model, without)
    converters = tuple(
        (index, field, field.from_db_value) for index, field in enumerate(fields) if hasattr(field, "from_db_value")
    )
    return _Reading(attnames=[field.attname for field in fields], converters=converters)
