"""The chat's hot statements written as SQL, each one round trip, where the SQL pays
(infra/rows.py says why; bench/statements.py measures each against its ORM equivalent,
and each says its figure). coach/services.py, coach/claims.py and coach/selectors.py say
what each one means; this says how."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, TypedDict, cast

from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, connection
from psycopg import sql

from coach.models import UNANSWERED, ChatSession, Message
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
    update_assignments,
)

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

Status = Message.Status


class RunningTurns(TypedDict):
    running_turns: int


type SessionWithRunningTurns = WithAnnotations[ChatSession, RunningTurns]

# The conversation's columns a post leaves unread (deferred, as `.defer()` leaves them).
UNREAD_WHEN_POSTING = ("prompt",)


def session_locked(*, user_id: int, session_id: int) -> SessionWithRunningTurns | None:
    """The person's conversation, with `running_turns`: how many of their messages are
    waiting for, or getting, a reply now (as selectors.running_turns_of counts them),
    locked until the transaction ends (which the caller holds open); None if not theirs.

    The person's turns are locked first, for the transaction too: posts to two of their
    conversations at once each lock a conversation of their own, and would otherwise both
    count the same replies and both pass the limit. The count is read by a statement of its
    own after that lock, so it sees what the post it waited for saved."""
    pending, answering = UNANSWERED
    parameters: dict[str, int | str] = {"user_id": user_id, "session_id": session_id, "role": Message.Role.USER}
    with connection.cursor() as cursor:
        cursor.execute(_sql().turns_of_person_locked, {"user_id": user_id, "turns": TURNS_OF_A_PERSON})
        cursor.execute(_sql().session_locked, {**parameters, "pending": pending, "answering": answering})
        row = cursor.fetchone()
    if row is None:
        return None
    # Read as the ORM's annotate() would leave it, its kept prompt deferred: posting a
    # message has no use for it, and decrypting it would cost every post.
    found = cast("SessionWithRunningTurns", from_row(ChatSession, row[:-1], without=UNREAD_WHEN_POSTING))
    found.running_turns = row[-1]
    return found


def message_add_unless_sent(
    *, message: Message, session: ChatSession, session_fields: Sequence[str], since: datetime
) -> tuple[Message | None, Message | None]:
    """Insert the person's `message` and save `session_fields` of its conversation, unless
    a submission with the message's client id is there already, in one statement that
    also reads what may have been sent already: that submission if there is one, else the
    person's newest message written after `since`, if any.

    (the message as saved, with its id and its `session`, None if not inserted; what was
    found). Whether a message found by its text is the same one, only the caller can tell
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
        cursor.execute(_message_add_unless_sent_sql(assignments.as_string()), parameters)
        pk, *found = cursor.fetchone()
    added = None
    if pk is not None:
        added = saved(message, pk)
        added.session = session
    return added, None if found[0] is None else from_row(Message, found)


def message_claimed(*, message_id: int, user_id: int, token: uuid.UUID, now: datetime, by: str) -> Message | None:
    """Mark the person's waiting message as being answered by the attempt `token`, and read
    it back with its conversation and its person (`message.session.user`); None if no
    such message waits.

    Every condition is on the message's own columns, the owner through a subquery, not a
    join: PostgreSQL then tests the status again on the row a concurrent claim left, so of
    two claims at once only one matches."""
    parameters: dict[str, str | int | uuid.UUID | datetime] = {
        "answering": Status.ANSWERING,
        "pending": Status.PENDING,
        "token": token,
        "now": now,
        "by": by,
        "message_id": message_id,
        "user_id": user_id,
        "role": Message.Role.USER,
    }
    with connection.cursor() as cursor:
        cursor.execute(_sql().message_claimed, parameters)
        row = cursor.fetchone()
    if row is None:
        return None
    message_end = column_count(Message)
    session_end = message_end + column_count(ChatSession)
    message = from_row(Message, row[:message_end])
    message.session = from_row(ChatSession, row[message_end:session_end])
    message.session.user = from_row(get_user_model(), row[session_end:])
    return message


def messages_before(*, message: Message, limit: int, from_id: int | None = None) -> list[Message]:
    """The conversation's newest `limit` messages before `message` (from `from_id` on),
    newest first."""
    parameters = {"session_id": message.session_id, "id": message.pk, "from_id": from_id, "limit": limit}
    with connection.cursor() as cursor:
        cursor.execute(_sql().messages_before, parameters)
        return [from_row(Message, row) for row in cursor.fetchall()]


def reply_add_if_held(
    *, message_id: int, session_id: int, token: uuid.UUID, reply: Message, now: datetime
) -> Message | None:
    """Mark the message answered, add its `reply` and bring its conversation's times up to
    `now`, all or nothing, in one statement: only while the attempt `token` still holds it.
    The reply as saved, with its id; None when the attempt no longer holds the message,
    and nothing changed."""
    parameters = {
        "answered": Status.ANSWERED,
        "answering": Status.ANSWERING,
        "token": token,
        "message_id": message_id,
        "session_id": session_id,
        "now": now,
        **insert_parameters(reply),
    }
    with connection.cursor() as cursor:
        cursor.execute(_sql().reply_add_if_held, parameters)
        row = cursor.fetchone()
    return None if row is None else saved(reply, row[0])


# What a reader of a reply needs of its message: no text to decrypt.
FOLLOWED = ["id", "session_id", "status"]


def message_to_follow_sql() -> tuple[sql.SQL, sql.Composed]:
    """For a read of a login session `s` (accounts/sessions.py) that also reads the message
    a reader follows: (the columns, the joins). The columns are the session's owner as the
    session row names them, then message_to_follow's columns, NULL if the owner has no
    such message in that conversation; the parameters: session_id, message_id, role."""
    return sql.SQL(", s.user_id, m.id, m.session_id, m.status"), sql.SQL(
        """LEFT JOIN ({message} m JOIN {session} c ON c.id = m.session_id)
          ON m.id = %(message_id)s AND m.session_id = %(session_id)s AND m.role = %(role)s AND c.user_id = s.user_id"""
    ).format(message=table(Message), session=table(ChatSession))


def message_to_follow_from(values: Sequence[object], *, user_id: int) -> Message | None:
    """The message in message_to_follow_sql's columns, if the person `user_id` owns it."""
    owner_id, *message = values
    if owner_id != user_id or message[0] is None:
        return None
    return Message.from_db(DEFAULT_DB_ALIAS, FOLLOWED, message)


# The first key of the advisory lock on a person's turns (the second is their id): any
# number no other advisory lock of the app's uses.
TURNS_OF_A_PERSON = 7401


@dataclass(frozen=True)
class _Statements:
    turns_of_person_locked: str
    session_locked: str
    message_claimed: str
    messages_before: str
    reply_add_if_held: str


@cache
def _sql() -> _Statements:
    """The statements' text, composed once from the models' tables and columns."""
    return _Statements(
        # A transaction lock, released as the transaction ends; ids past 2^31 share a key
        # with another person's now and then, which only makes their posts wait in turn.
        turns_of_person_locked="SELECT pg_advisory_xact_lock(%(turns)s, mod(%(user_id)s::bigint, 2147483647)::int)",
        session_locked=text(_session_locked()),
        message_claimed=text(_message_claimed()),
        messages_before=text(_messages_before()),
        reply_add_if_held=text(_reply_add_if_held()),
    )


def _session_locked() -> sql.Composed:
    # Measured (bench/statements.py, against the ORM): a message posted, 4.8 ms against 11.7.
    message, session = table(Message), table(ChatSession)
    return sql.SQL(
        """SELECT {session_columns}, (
            SELECT count(*) FROM {message} m JOIN {session} theirs ON theirs.id = m.session_id
            WHERE theirs.user_id = %(user_id)s AND m.role = %(role)s AND m.status IN (%(pending)s, %(answering)s)
        )
        FROM {session} s WHERE s.id = %(session_id)s AND s.user_id = %(user_id)s
        FOR UPDATE OF s"""
    ).format(session_columns=columns(ChatSession, "s", without=UNREAD_WHEN_POSTING), message=message, session=session)


def _message_claimed() -> sql.Composed:
    # Measured: a turn's beginning, its claim and history as SQL, 22.3 ms against 31.4.
    return sql.SQL(
        """WITH claimed AS (
            UPDATE {message} SET status = %(answering)s, error = '', attempt = %(token)s, claimed_at = %(now)s,
                   heartbeat_at = statement_timestamp(), claimed_by = %(by)s
            WHERE id = %(message_id)s AND role = %(role)s AND status = %(pending)s
              AND session_id IN (SELECT id FROM {session} WHERE user_id = %(user_id)s)
            RETURNING *
        )
        SELECT {claimed}, {session_columns}, {user_columns}
        FROM claimed JOIN {session} s ON s.id = claimed.session_id JOIN {people} u ON u.id = s.user_id"""
    ).format(
        message=table(Message),
        session=table(ChatSession),
        people=table(get_user_model()),
        claimed=columns(Message, "claimed"),
        session_columns=columns(ChatSession, "s"),
        user_columns=columns(get_user_model(), "u"),
    )


def _messages_before() -> sql.Composed:
    return sql.SQL(
        """SELECT {columns} FROM {message} h WHERE h.session_id = %(session_id)s AND h.id < %(id)s
          AND (%(from_id)s::bigint IS NULL OR h.id >= %(from_id)s::bigint)
        ORDER BY h.id DESC LIMIT %(limit)s"""
    ).format(columns=columns(Message, "h"), message=table(Message))


def _reply_add_if_held() -> sql.Composed:
    # Measured: a reply saved, 1.2 ms against 3.7.
    return sql.SQL(
        """WITH held AS (
            UPDATE {message} SET status = %(answered)s, error = ''
            WHERE id = %(message_id)s AND status = %(answering)s AND attempt = %(token)s
            RETURNING id
        ), touched AS (
            UPDATE {session} SET last_message_at = %(now)s, updated_at = %(now)s
            WHERE id = %(session_id)s AND EXISTS (SELECT 1 FROM held)
        )
        INSERT INTO {message} ({insert_columns})
        SELECT {insert_placeholders} FROM held
        RETURNING id"""
    ).format(
        message=table(Message),
        session=table(ChatSession),
        insert_columns=insert_columns(Message),
        insert_placeholders=insert_placeholders(Message),
    )


@cache
def _message_add_unless_sent_sql(assignments: str) -> str:
    return text(
        sql.SQL(
            """WITH found AS (
                SELECT {columns} FROM {message} m
                WHERE m.session_id = %(session_id)s
                  AND ((m.role = %(role)s AND m.created_at > %(since)s) OR m.client_id = %(client_id)s::uuid)
                ORDER BY CASE WHEN m.client_id = %(client_id)s::uuid THEN 0 ELSE 1 END, m.created_at DESC, m.id DESC
                LIMIT 1
            ), added AS (
                INSERT INTO {message} ({insert_columns})
                SELECT {insert_placeholders}
                WHERE NOT EXISTS (SELECT 1 FROM found WHERE found.client_id = %(client_id)s::uuid)
                RETURNING id
            ), touched AS (
                UPDATE {session} SET {assignments} WHERE id = %(session_id)s AND EXISTS (SELECT 1 FROM added)
            )
            SELECT (SELECT id FROM added), {found}
            FROM (SELECT 1) AS one LEFT JOIN found ON true"""
        ).format(
            columns=columns(Message, "m"),
            message=table(Message),
            session=table(ChatSession),
            insert_columns=insert_columns(Message),
            insert_placeholders=insert_placeholders(Message),
            assignments=sql.SQL(assignments),
            found=columns(Message, "found"),
        )
    )
