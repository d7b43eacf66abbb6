"""The statements on the chat's hot path (a message posted, its reader, its turn), each
one round trip, written as SQL (infra/sql_rows.py says why). coach/services.py and
coach/selectors.py say what each one means; this says how."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache

from django.contrib.auth import get_user_model
from django.db import connection

from coach.communication import SentEmailsPart, sent_emails_part
from coach.models import UNANSWERED, ChatSession, Message
from infra.sql_rows import (
    column_count,
    column_list,
    from_row,
    insert_columns,
    insert_parameters,
    insert_placeholders,
    null_columns,
    saved_as,
    update_assignments,
)
from memory.context import SentEmail
from memory.models import Memory
from memory.statements import WITHOUT_EMBEDDING, memories_of_sql, memory_from_row


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


@dataclass(frozen=True)
class Claim:
    """A claimed message (with `message.session.user`) and what its turn reads with it."""

    message: Message
    # The conversation's newest messages before it, newest first.
    history: list[Message]
    # When asked for and the turn uses memory (the conversation is remembered and memory
    # is on), the person's memories, newest change first (as memories_of reads them), and
    # the emails lately sent to them, newest first, as the prompt quotes them (where the
    # emails app gave its read as a part: coach/communication.py); otherwise None: not read.
    memories: list[Memory] | None
    sent_emails: list[SentEmail] | None


def message_claim(
    *, message_id: int, user_id: int, now: datetime, history: int = 0, memories: bool = False
) -> Claim | None:
    """Mark the person's waiting message as being answered and read it back with its
    conversation and its person, with the conversation's newest `history` messages
    before it, and (`memories`) with what the prompt holds of the person's memory; None if
    no such message waits.

    Every condition is on the message's own columns, the owner through a subquery, not a
    join: PostgreSQL then tests the status again on the row a concurrent claim left, so of
    two claims at once only one matches. A claim that matches nothing reads nothing else."""
    emails = sent_emails_part()
    claim = _claim_statement(emails)
    with connection.cursor() as cursor:
        cursor.execute(
            claim.sql,
            {
                **(emails.parameters if emails is not None else {}),
                "answering": Message.Status.ANSWERING,
                "now": now,
                "message_id": message_id,
                "user_id": user_id,
                "role": Message.Role.USER,
                "pending": Message.Status.PENDING,
                "history": history,
                "memories": memories,
            },
        )
        rows = cursor.fetchall()
    if not rows:
        return None
    # Each part's rows hold its own columns in their place, NULL in the others'.
    claimed, *_ = rows
    message = from_row(Message, claimed[claim.message])
    message.session = from_row(ChatSession, claimed[claim.session])
    message.session.user = from_row(get_user_model(), claimed[claim.user])
    uses_memory = memories and message.session.remembered and message.session.user.memory_enabled
    return Claim(
        message=message,
        history=[from_row(Message, row[claim.earlier]) for row in rows if row[0] == _EARLIER],
        memories=[memory_from_row(row[claim.memory]) for row in rows if row[0] == _MEMORY] if uses_memory else None,
        sent_emails=(
            [emails.from_row(row[claim.email]) for row in rows if row[0] == _EMAIL]
            if uses_memory and emails is not None
            else None
        ),
    )


# The parts of a claim's rows, in their order.
_CLAIMED, _EARLIER, _MEMORY, _EMAIL = 0, 1, 2, 3


@dataclass(frozen=True)
class _ClaimStatement:
    sql: str
    # Where each part's columns sit in a row.
    message: slice
    session: slice
    user: slice
    earlier: slice
    memory: slice
    email: slice


@cache
def _claim_statement(emails: SentEmailsPart | None) -> _ClaimStatement:
    """The claim, with the emails read as its last part where the emails app gave it."""
    people = get_user_model()
    message, session, user = Message._meta.db_table, ChatSession._meta.db_table, people._meta.db_table
    no_message, no_memory = null_columns(Message), null_columns(Memory, without=WITHOUT_EMBEDDING)
    no_claim = f"{no_message}, {null_columns(ChatSession)}, {null_columns(people)}"
    no_email = "" if emails is None else f", {emails.nulls}"
    # The claimed message's person, if asked for their memory and the turn uses memory.
    remembering = f"""(
        SELECT u.id FROM claimed JOIN {session} s ON s.id = claimed.session_id JOIN {user} u ON u.id = s.user_id
        WHERE %(memories)s AND s.remembered AND u.memory_enabled
    )"""  # noqa: S608 (names from the models, values as parameters)
    sent, sent_part = "", ""
    if emails is not None:
        sent = f", sent AS ({emails.select(remembering)})"
        sent_part = f"""
        UNION ALL
        SELECT {_EMAIL}, sent.newest, {no_claim}, {no_message}, {no_memory}, {emails.columns("sent")}
        FROM sent"""  # noqa: S608 (names from the models, values as parameters)
    sql = f"""
        WITH claimed AS (
            UPDATE {message} SET status = %(answering)s, error = '', claimed_at = %(now)s
            WHERE id = %(message_id)s AND role = %(role)s AND status = %(pending)s
              AND session_id IN (SELECT id FROM {session} WHERE user_id = %(user_id)s)
            RETURNING *
        ), earlier AS (
            SELECT h.* FROM {message} h JOIN claimed ON h.session_id = claimed.session_id
            WHERE h.id < claimed.id ORDER BY h.id DESC LIMIT %(history)s
        ), kept AS ({memories_of_sql(remembering)}){sent}
        SELECT {_CLAIMED} AS part, 0 AS newest, {column_list(Message, "claimed")}, {column_list(ChatSession, "s")},
               {column_list(people, "u")}, {no_message}, {no_memory}{no_email}
        FROM claimed
        JOIN {session} s ON s.id = claimed.session_id
        JOIN {user} u ON u.id = s.user_id
        UNION ALL
        SELECT {_EARLIER}, -earlier.id, {no_claim}, {column_list(Message, "earlier")}, {no_memory}{no_email}
        FROM earlier
        UNION ALL
        SELECT {_MEMORY}, kept.newest, {no_claim}, {no_message},
               {column_list(Memory, "kept", without=WITHOUT_EMBEDDING)}{no_email}
        FROM kept{sent_part}
        ORDER BY part, newest
    """  # noqa: S608 (names from the models and the emails app's SQL, values as parameters)
    widths = [
        column_count(Message),
        column_count(ChatSession),
        column_count(people),
        column_count(Message),
        column_count(Memory, without=WITHOUT_EMBEDDING),
        0 if emails is None else emails.width,
    ]
    # After the part and its order.
    starts = [2 + sum(widths[:index]) for index in range(len(widths))]
    return _ClaimStatement(sql, *(slice(start, start + width) for start, width in zip(starts, widths, strict=True)))


def reply_add_if_held(*, message: Message, reply: Message, now: datetime) -> Message | None:
    """Mark `message` answered, add its `reply` and bring its conversation's times up to
    `now`, all or nothing, in one statement: only while the message is still being
    answered (None when it is not, and nothing changed)."""
    with connection.cursor() as cursor:
        cursor.execute(
            _sql().reply_add_if_held,
            {
                "answered": Message.Status.ANSWERED,
                "answering": Message.Status.ANSWERING,
                "message_id": message.pk,
                "session_id": message.session_id,
                "now": now,
                **insert_parameters(reply),
            },
        )
        row = cursor.fetchone()
    if row is None:
        return None
    # What was written is what the instance holds: nothing to read back, or to decrypt.
    saved_as(reply, row[0])
    return reply


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
    reply_add_if_held: str


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
        reply_add_if_held=f"""
            WITH held AS (
                UPDATE {message} SET status = %(answered)s, error = ''
                WHERE id = %(message_id)s AND status = %(answering)s
                RETURNING id
            ), touched AS (
                UPDATE {session} SET last_message_at = %(now)s, updated_at = %(now)s
                WHERE id = %(session_id)s AND EXISTS (SELECT 1 FROM held)
            )
            INSERT INTO {message} ({insert_columns(Message)})
            SELECT {insert_placeholders(Message)} FROM held
            RETURNING id
        """,  # noqa: S608 (names from the models, values as parameters)
    )
