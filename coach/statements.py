"""The statements on the chat's hot path (a message posted, its reader, its turn), each
one round trip, written as SQL (infra/sql_rows.py says why). coach/services.py and
coach/selectors.py say what each one means; this says how."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache

from django.db import connection

from coach.models import UNANSWERED, ChatSession, Message
from infra.sql_rows import (
    column_list,
    from_row,
    insert_columns,
    insert_parameters,
    insert_placeholders,
    saved_as,
    update_assignments,
)


def session_with_running_turns(*, user_id: int, session_id: int) -> ChatSession | None:
    """The person's conversation, with `running_turns`: how many of their messages are
    waiting for, or getting, a reply now (as selectors.running_turns_of counts them)."""
    return _session_read(_sql().session_with_running_turns, user_id=user_id, session_id=session_id)


def session_locked(*, user_id: int, session_id: int) -> ChatSession | None:
    """The person's conversation, as session_with_running_turns reads it, locked until the
    transaction ends (which the caller holds open); None if it is not theirs."""
    return _session_read(_sql().session_locked, user_id=user_id, session_id=session_id)


def _session_read(sql: str, *, user_id: int, session_id: int) -> ChatSession | None:
    pending, answering = UNANSWERED
    parameters = {"user_id": user_id, "session_id": session_id, "role": Message.Role.USER}
    with connection.cursor() as cursor:
        cursor.execute(sql, {**parameters, "pending": pending, "answering": answering})
        row = cursor.fetchone()
    if row is None:
        return None
    found = from_row(ChatSession, row[:-1])
    found.running_turns = row[-1]
    return found


# What a reader of a reply needs of its message: no text to decrypt.
FOLLOWED = ["id", "session_id", "status"]


@cache
def message_to_follow_sql() -> tuple[str, str]:
    """For a read of a login session `s` (accounts/sessions.py) that also reads the message
    a reader follows: (the columns, the joins). The columns are the session's owner as the
    session row names them, then message_to_follow's columns, NULL if the owner has no
    such message in that conversation; the parameters: session_id, message_id, role."""
    message, session = Message._meta.db_table, ChatSession._meta.db_table
    columns = ", s.user_id, m.id, m.session_id, m.status"
    joins = f"""
        LEFT JOIN ({message} m JOIN {session} c ON c.id = m.session_id)
          ON m.id = %(message_id)s AND m.session_id = %(session_id)s AND m.role = %(role)s AND c.user_id = s.user_id
    """
    return columns, joins


def message_to_follow_from(values: Sequence[object], *, user_id: int) -> Message | None:
    """The message in message_to_follow_sql's columns, if the person `user_id` owns it."""
    owner_id, *message = values
    if owner_id != user_id or message[0] is None:
        return None
    return Message.from_db(connection.alias, FOLLOWED, message)


def message_to_follow(*, user_id: int, session_id: int, message_id: int) -> Message | None:
    """The person's own message in that conversation, with only what a reader of its reply
    needs (id, conversation, status: no text to decrypt); None if there is no such message."""
    with connection.cursor() as cursor:
        cursor.execute(_sql().message_to_follow, [message_id, session_id, Message.Role.USER, user_id])
        row = cursor.fetchone()
    return None if row is None else Message.from_db(connection.alias, FOLLOWED, row)


def message_add_unless_sent(
    *, message: Message, session: ChatSession, session_fields: Sequence[str], since: datetime
) -> tuple[bool, Message | None]:
    """Insert the person's `message` and save `session_fields` of its conversation, unless
    a submission with the message's client id is there already, in one statement that
    also reads what may have been sent already: that submission if there is one, else the
    person's newest message written after `since`, if any.

    (whether it was inserted, what was found): an inserted message comes back saved, with
    its id. Whether a message found by its text is the same one, only the caller can tell
    (the text is encrypted): it undoes the insert by ending its transaction."""
    assignments, session_values = update_assignments(session, session_fields, "session")
    parameters = {
        "session_id": session.pk,
        "role": Message.Role.USER,
        "since": since,
        "client_id": message.client_id,
        **session_values,
        **insert_parameters(message),
    }
    with connection.cursor() as cursor:
        cursor.execute(_message_add_unless_sent_sql(assignments), parameters)
        pk, *found = cursor.fetchone()
    if pk is not None:
        saved_as(message, pk)
    return pk is not None, None if found[0] is None else from_row(Message, found)


@cache
def _message_add_unless_sent_sql(assignments: str) -> str:
    message, session = Message._meta.db_table, ChatSession._meta.db_table
    return f"""
        WITH found AS (
            SELECT {column_list(Message, "m")} FROM {message} m
            WHERE m.session_id = %(session_id)s
              AND ((m.role = %(role)s AND m.created_at > %(since)s) OR m.client_id = %(client_id)s::uuid)
            ORDER BY CASE WHEN m.client_id = %(client_id)s::uuid THEN 0 ELSE 1 END, m.created_at DESC, m.id DESC
            LIMIT 1
        ), added AS (
            INSERT INTO {message} ({insert_columns(Message)})
            SELECT {insert_placeholders(Message)}
            WHERE NOT EXISTS (SELECT 1 FROM found WHERE found.client_id = %(client_id)s::uuid)
            RETURNING id
        ), touched AS (
            UPDATE {session} SET {assignments} WHERE id = %(session_id)s AND EXISTS (SELECT 1 FROM added)
        )
        SELECT (SELECT id FROM added), {column_list(Message, "found")}
        FROM (SELECT 1) AS one LEFT JOIN found ON true
    """  # noqa: S608 (names from the models, values as parameters)


@dataclass(frozen=True)
class _Statements:
    session_with_running_turns: str
    session_locked: str
    message_to_follow: str


@cache
def _sql() -> _Statements:
    """The statements' text, built once from the models' tables and columns."""
    message, session = Message._meta.db_table, ChatSession._meta.db_table
    session_with_running_turns = f"""
        SELECT {column_list(ChatSession, "s")}, (
            SELECT count(*) FROM {message} m JOIN {session} theirs ON theirs.id = m.session_id
            WHERE theirs.user_id = %(user_id)s AND m.role = %(role)s AND m.status IN (%(pending)s, %(answering)s)
        )
        FROM {session} s WHERE s.id = %(session_id)s AND s.user_id = %(user_id)s
    """  # noqa: S608 (names from the models, values as parameters)
    return _Statements(
        session_with_running_turns=session_with_running_turns,
        # The count is of the statement's snapshot, taken before any wait for the lock: as
        # fresh as the limit it serves needs (it was read before the transaction once).
        session_locked=f"{session_with_running_turns} FOR UPDATE OF s",
        message_to_follow=f"""
            SELECT m.id, m.session_id, m.status FROM {message} m JOIN {session} s ON s.id = m.session_id
            WHERE m.id = %s AND m.session_id = %s AND m.role = %s AND s.user_id = %s
        """,  # noqa: S608 (names from the models, values as parameters)
    )
