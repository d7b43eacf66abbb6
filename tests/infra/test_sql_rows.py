"""Rows read and written by hand-made SQL come and go exactly as through the ORM:
every column, in order, encrypted on the way in and decrypted on the way out."""

from __future__ import annotations

import uuid

import pytest
from django.db import DataError, connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.models import User
from coach.models import ChatSession, Message
from infra.sql_rows import (
    column_count,
    column_list,
    from_row,
    insert,
    insert_columns,
    insert_linked,
    insert_parameters,
    insert_placeholders,
)
from memory.models import Memory, MemoryEvent
from tests.infra.rows import field_values

pytestmark = pytest.mark.django_db


def test_a_row_read_by_hand_is_the_instance_the_orm_reads(user: User) -> None:
    session = ChatSession.objects.create(user=user, title="Knees", summary="We spoke of knees")
    message = Message.objects.create(
        session=session, role="user", content="Ça va? 🏃", status="pending", client_id=uuid.uuid4()
    )

    with connection.cursor() as cursor:
        columns = f"{column_list(Message, 'm')}, {column_list(ChatSession, 's')}"
        cursor.execute(
            f"SELECT {columns} FROM coach_message m JOIN coach_chatsession s ON s.id = m.session_id WHERE m.id = %s",  # noqa: S608
            [message.pk],
        )
        row = cursor.fetchone()

    assert len(row) == column_count(Message) + column_count(ChatSession)
    read = from_row(Message, row[: column_count(Message)])
    assert field_values(read) == field_values(Message.objects.get(pk=message.pk))
    assert read.content == "Ça va? 🏃"
    session_read = from_row(ChatSession, row[column_count(Message) :])
    assert field_values(session_read) == field_values(ChatSession.objects.get(pk=session.pk))


def test_a_row_written_by_hand_is_stored_as_a_save_stores_it(user: User) -> None:
    session = ChatSession.objects.create(user=user)
    now = timezone.now()
    unsaved = Message(session=session, role="assistant", content="Secret plan", status="complete", created_at=now)

    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO coach_message ({insert_columns(Message)}) "
            f"SELECT {insert_placeholders(Message)} RETURNING id, content",
            insert_parameters(unsaved),
        )
        pk, stored = cursor.fetchone()

    assert "Secret" not in stored
    saved = Message.objects.get(pk=pk)
    assert (saved.content, saved.created_at, saved.error, saved.client_id) == ("Secret plan", now, "", None)
    assert (saved.prompt_tokens, saved.tokens_estimated, saved.reply_to_id) == (None, False, None)


def test_a_row_of_the_wrong_length_is_refused_not_read_into_the_wrong_fields() -> None:
    with pytest.raises(ValueError, match="columns to read"):
        from_row(Message, (1, 2, 3))


def test_text_too_long_for_its_column_fails_as_through_the_orm_rather_than_being_cut_short(user: User) -> None:
    session = ChatSession.objects.create(user=user)
    unsaved = Message(session=session, role="assistant" * 3, content="Hello", status="complete")

    with pytest.raises(DataError), connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO coach_message ({insert_columns(Message)}) SELECT {insert_placeholders(Message)}",
            insert_parameters(unsaved),
        )


def test_an_instance_inserted_by_sql_is_saved_and_reads_back_as_written(user: User) -> None:
    session = ChatSession.objects.create(user=user)
    written = Message(session=session, role="user", content="Ça va? 🏃", status="pending", client_id=uuid.uuid4())

    insert(written)

    assert written.pk is not None and not written._state.adding
    assert field_values(Message.objects.get(pk=written.pk)) == field_values(written)
    with connection.cursor() as cursor:
        cursor.execute("SELECT content FROM coach_message WHERE id = %s", [written.pk])
        assert "Ça va" not in cursor.fetchone()[0]


def test_an_instance_and_its_child_inserted_in_one_statement_read_back_as_two_saves_write_them(user: User) -> None:
    memory = Memory(user=user, key="knee", tier="profile", category="injury", summary="Left knee", content="No jumps")
    memory.set_key_digest()
    event = MemoryEvent(user=user, key="knee", actor="coach", action="created", after='{"summary": "Left knee"}')

    with CaptureQueriesContext(connection) as queries:
        insert_linked(memory, event, link="memory_id")

    assert len(queries) == 1
    assert memory.pk is not None and event.pk is not None and event.memory_id == memory.pk
    assert not memory._state.adding and not event._state.adding
    assert field_values(Memory.objects.get(pk=memory.pk)) == field_values(memory)
    assert field_values(MemoryEvent.objects.get(pk=event.pk)) == field_values(event)


def test_a_child_that_cannot_be_stored_leaves_no_instance_behind(transactional_db: None, user: User) -> None:
    # Outside a transaction, as two inserts would each be kept or not on their own.
    memory = Memory(user=user, key="knee", tier="profile", category="injury", summary="Left knee", content="No jumps")
    memory.set_key_digest()
    event = MemoryEvent(user=user, key="knee", actor="coach" * 10, action="created")

    with pytest.raises(DataError):
        insert_linked(memory, event, link="memory_id")

    assert not Memory.objects.filter(user=user).exists()


def test_a_child_is_linked_by_its_foreign_key_named_either_way() -> None:
    by_name = insert_placeholders(Message, "child", linked="session")
    by_column = insert_placeholders(Message, "child", linked="session_id")

    assert by_name == by_column
    assert by_name.split(", ").count("linked.id") == 1
    assert "linked.id" not in insert_placeholders(Message, "child")
