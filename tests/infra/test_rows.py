"""Rows read and written by the statements written as SQL come and go exactly as through
the ORM: every column of the model, in order, encrypted on the way in and decrypted on the
way out, so a column added to a model is read and written without a change to any of them."""

from __future__ import annotations

import uuid

import pytest
from django.db import DataError, connection
from psycopg import sql

from accounts.models import User
from coach.models import ChatSession, Message
from infra.rows import (
    column_count,
    columns,
    from_row,
    insert_columns,
    insert_parameters,
    insert_placeholders,
    saved,
    table,
    text,
)
from memory.models import Memory
from tests.infra.rows import field_values

pytestmark = pytest.mark.django_db


def test_a_row_read_by_sql_is_the_instance_the_orm_reads(user: User) -> None:
    session = ChatSession.objects.create(user=user, title="Knees", summary="We spoke of knees")
    message = Message.objects.create(
        session=session, role="user", content="Ça va? 🏃", status="pending", client_id=uuid.uuid4()
    )
    statement = sql.SQL("SELECT {m}, {s} FROM {message} m JOIN {session} s ON s.id = m.session_id WHERE m.id = %s")

    with connection.cursor() as cursor:
        cursor.execute(
            text(
                statement.format(
                    m=columns(Message, "m"),
                    s=columns(ChatSession, "s"),
                    message=table(Message),
                    session=table(ChatSession),
                )
            ),
            [message.pk],
        )
        row = cursor.fetchone()

    assert len(row) == column_count(Message) + column_count(ChatSession)
    read = from_row(Message, row[: column_count(Message)])
    assert field_values(read) == field_values(Message.objects.get(pk=message.pk))
    assert read.content == "Ça va? 🏃" and not read.get_deferred_fields()
    assert field_values(from_row(ChatSession, row[column_count(Message) :])) == field_values(session)


@pytest.mark.parametrize("model", [Message, ChatSession, Memory, User], ids=lambda model: model.__name__)
def test_every_column_of_the_model_is_named_so_a_column_added_is_read_too(model: type) -> None:
    named = columns(model, "x").as_string()

    assert column_count(model) == len(model._meta.concrete_fields)
    for field in model._meta.concrete_fields:
        assert f'"x"."{field.column}"' in named


def test_a_row_written_by_sql_is_stored_as_a_save_stores_it(user: User) -> None:
    session = ChatSession.objects.create(user=user)
    unsaved = Message(session=session, role="assistant", content="Secret plan", status="complete")
    insert = sql.SQL("INSERT INTO {message} ({names}) SELECT {values} RETURNING id, content").format(
        message=table(Message), names=insert_columns(Message), values=insert_placeholders(Message)
    )

    with connection.cursor() as cursor:
        cursor.execute(
            text(insert),
            insert_parameters(unsaved),
        )
        pk, stored = cursor.fetchone()

    assert "Secret" not in stored
    row = Message.objects.get(pk=pk)
    assert (row.content, row.error, row.client_id, row.reply_to_id) == ("Secret plan", "", None, None)
    # And handed back as the instance a read of that row makes.
    assert field_values(saved(unsaved, pk)) == field_values(row)


def test_a_row_of_the_wrong_length_is_refused_not_read_into_the_wrong_fields() -> None:
    with pytest.raises(ValueError, match="columns to read"):
        from_row(Message, (1, 2, 3))


def test_text_too_long_for_its_column_fails_as_through_the_orm_rather_than_being_cut_short(user: User) -> None:
    session = ChatSession.objects.create(user=user)
    unsaved = Message(session=session, role="assistant" * 3, content="Hello", status="complete")
    insert = sql.SQL("INSERT INTO {message} ({names}) SELECT {values}").format(
        message=table(Message), names=insert_columns(Message), values=insert_placeholders(Message)
    )

    with pytest.raises(DataError), connection.cursor() as cursor:
        cursor.execute(
            text(insert),
            insert_parameters(unsaved),
        )
