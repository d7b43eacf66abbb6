"""Model rows for statements written as SQL: the columns to name, the values to write,
and model instances made from what comes back.

The ORM compiles a query on every call, a few hundred microseconds of CPU each, more
than PostgreSQL takes to answer a simple one; and it cannot say "update this row and
hand back it, its parent and theirs" in one round trip. The few statements on the chat's
hot path are written as SQL instead, with these helpers taking the columns, how each
value is prepared (encryption included) and how each is read back (decryption included)
from the models themselves, so the SQL follows the schema as the ORM would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import CharField, Field, Model
from django.db.models.expressions import Col


def column_list(model: type[Model], alias: str, *, without: tuple[str, ...] = ()) -> str:
    """Every stored column of `model` but those `without` names, as `alias.column`, in
    the order `from_row` reads."""
    quote = connections[DEFAULT_DB_ALIAS].ops.quote_name
    return ", ".join(f"{alias}.{quote(field.column)}" for field in _fields(model, without))


def null_columns(model: type[Model], *, without: tuple[str, ...] = ()) -> str:
    """A NULL of each column's type for the columns `column_list` names: the place one part
    of a UNION leaves for another part's columns (an untyped NULL would be taken for text)."""
    connection = connections[DEFAULT_DB_ALIAS]
    return ", ".join(f"NULL::{_cast_type(field, connection)}" for field in _fields(model, without))


def column_count(model: type[Model], *, without: tuple[str, ...] = ()) -> int:
    return len(_fields(model, without))


def from_row[M: Model](model: type[M], values: Sequence[Any], *, without: tuple[str, ...] = ()) -> M:
    """An instance of `model` from its columns as `column_list` named them, each value
    converted as the ORM converts it (decrypted, made aware, ...); the fields `without`
    names are deferred, as `.defer()` leaves them."""
    reading = _reading(model, without)
    if len(values) != len(reading.attnames):
        raise ValueError(f"{model.__name__} has {len(reading.attnames)} columns to read, the row {len(values)}")
    connection = connections[DEFAULT_DB_ALIAS]
    converted = list(values)
    for index, column, converters in reading.converters:
        for convert in converters:
            converted[index] = convert(converted[index], column, connection)
    return model.from_db(DEFAULT_DB_ALIAS, reading.attnames, converted)


@cache
def insert_columns(model: type[Model]) -> str:
    """The columns an insert names: all but the generated primary key."""
    quote = connections[DEFAULT_DB_ALIAS].ops.quote_name
    return ", ".join(quote(field.column) for field in _insert_fields(model))


@cache
def insert_placeholders(model: type[Model], prefix: str = "insert", linked: str | None = None) -> str:
    """Placeholders for `insert_columns`, each cast to its column's type: a value that
    reaches an insert through a SELECT is not typed by the column it lands in. Text is cast
    without its length, so one too long fails on the column, as through the ORM, rather
    than being cut short by the cast. The field `linked` names, if any, takes `linked.id`
    instead (the row it points at is inserted by the same statement)."""
    connection = connections[DEFAULT_DB_ALIAS]
    return ", ".join(
        "linked.id"
        if linked in (field.name, field.attname)
        else f"%({prefix}_{index})s::{_cast_type(field, connection)}"
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


def insert(instance: Model) -> None:
    """Insert a new instance as `save()` would, in a statement the ORM need not compile
    (no signals are sent: the app has none on these models); the instance gets its id."""
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(_insert_sql(type(instance)), insert_parameters(instance))
        (pk,) = cursor.fetchone()
    saved_as(instance, pk)


def insert_linked(instance: Model, child: Model, *, link: str) -> None:
    """Insert a new instance and a new child of it (`link`: the child's field for the
    instance's id) in one statement, as two saves would; both get their ids, the child
    its link."""
    field = child._meta.get_field(link)
    parameters = {**insert_parameters(instance), **insert_parameters(child, prefix="child")}
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(_insert_linked_sql(type(instance), type(child), link), parameters)
        linked_pk, pk = cursor.fetchone()
    saved_as(instance, linked_pk)
    setattr(child, field.attname, linked_pk)
    saved_as(child, pk)


def saved_as(instance: Model, pk: int) -> None:
    """Mark an instance written by SQL as saved under `pk`, as `save()` leaves it."""
    instance.pk = pk
    instance._state.adding, instance._state.db = False, DEFAULT_DB_ALIAS


def update_assignments(instance: Model, field_names: Sequence[str], prefix: str) -> tuple[str, dict[str, Any]]:
    """`column = placeholder, ...` for the named fields of a saved instance, and their
    values, prepared as `save(update_fields=...)` prepares them (an `auto_now` field set
    to now, as a save sets it)."""
    connection = connections[DEFAULT_DB_ALIAS]
    quote = connection.ops.quote_name
    assignments, parameters = [], {}
    for index, name in enumerate(field_names):
        field = instance._meta.get_field(name)
        placeholder = f"{prefix}_{index}"
        # The column types what is assigned to it: no cast (which would cut text short).
        assignments.append(f"{quote(field.column)} = %({placeholder})s")
        parameters[placeholder] = field.get_db_prep_save(field.pre_save(instance, add=False), connection)
    return ", ".join(assignments), parameters


@cache
def _insert_sql(model: type[Model]) -> str:
    table = connections[DEFAULT_DB_ALIAS].ops.quote_name(model._meta.db_table)
    return f"INSERT INTO {table} ({insert_columns(model)}) VALUES ({insert_placeholders(model)}) RETURNING id"  # noqa: S608


@cache
def _insert_linked_sql(model: type[Model], child: type[Model], link: str) -> str:
    quote = connections[DEFAULT_DB_ALIAS].ops.quote_name
    column = quote(child._meta.get_field(link).column)
    return f"""
        WITH linked AS (
            INSERT INTO {quote(model._meta.db_table)} ({insert_columns(model)})
            VALUES ({insert_placeholders(model)}) RETURNING id
        )
        INSERT INTO {quote(child._meta.db_table)} ({insert_columns(child)})
        SELECT {insert_placeholders(child, "child", linked=link)} FROM linked
        RETURNING {column}, id
    """  # noqa: S608 (names from the models, values as parameters)


def _cast_type(field: Field, connection: BaseDatabaseWrapper) -> str:
    if isinstance(field, CharField):
        return connection.ops.cast_char_field_without_max_length
    return field.cast_db_type(connection)


@cache
def _fields(model: type[Model], without: tuple[str, ...] = ()) -> tuple[Field, ...]:
    return tuple(field for field in model._meta.concrete_fields if field.name not in without)


@cache
def _insert_fields(model: type[Model]) -> tuple[Field, ...]:
    return tuple(field for field in _fields(model) if field is not model._meta.auto_field)


@dataclass(frozen=True)
class _Reading:
    attnames: list[str]
    # Only the columns whose values are converted (most are not), by their place in a row.
    converters: tuple[tuple[int, Col, tuple[Callable[..., Any], ...]], ...]


@cache
def _reading(model: type[Model], without: tuple[str, ...]) -> _Reading:
    connection = connections[DEFAULT_DB_ALIAS]
    fields = _fields(model, without)
    converters = []
    for index, field in enumerate(fields):
        column = field.get_col(model._meta.db_table)
        found = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
        if found:
            converters.append((index, column, tuple(found)))
    return _Reading(attnames=[field.attname for field in fields], converters=tuple(converters))
