"""The session engine (SESSION_ENGINE = "accounts.sessions"): Django's database sessions,
stored with the user they belong to (accounts.models.LoginSession).

A session is loaded with its owner, in one query; the authentication backends
(accounts/backends.py) take that owner as the request's user rather than asking the
database for the same row again."""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar
from functools import cache
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.contrib.sessions.backends import db
from django.db import connection
from django.utils import timezone
from psycopg import sql

from accounts.models import LoginSession
from infra.rows import column_count, columns, from_row, table, text

if TYPE_CHECKING:
    from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore

    from accounts.models import User
else:
    # Generic in its model in django-stubs alone.
    class DatabaseSessionStore[M](db.SessionStore):
        pass


# What a store reads when no caller read it already.
_UNREAD = object()

# The owner of the session this request (this context) loaded last; taken once, by the
# backend's get_user, which follows the load within the same `request.user`.
_owner_loaded: ContextVar[User | None] = ContextVar("owner_loaded_with_session", default=None)


def owner_loaded_with_session(user_id: Any) -> User | None:
    """The person the request's session was just loaded with, if `user_id` is theirs;
    None otherwise (then the backend reads the person itself). Taken once."""
    owner = _owner_loaded.get()
    if owner is None:
        return None
    _owner_loaded.set(None)
    return owner if str(owner.pk) == str(user_id) else None


class SessionStore(DatabaseSessionStore[LoginSession]):
    """Django's database store, through its documented extension points alone: the model
    (`get_model_class`, `create_model_instance`) and the read (`load`, `aload`)."""

    # What load_with read for load() to take (a LoginSession, or None for none);
    # _UNREAD when load() reads it itself.
    _read_already: object = _UNREAD
    # Set by the first load: SessionBase loads a session once, as it is first read.
    _loaded = False

    @classmethod
    def get_model_class(cls) -> type[LoginSession]:
        return LoginSession

    def create_model_instance(self, data: dict[str, Any]) -> LoginSession:
        return _owned(super().create_model_instance(data), data)

    async def acreate_model_instance(self, data: dict[str, Any]) -> LoginSession:
        # Saved from async code (an async login) as from sync: with its owner.
        return _owned(await super().acreate_model_instance(data), data)

    def load_with(self, *, columns: sql.Composable, joins: sql.Composable, parameters: dict[str, Any]) -> Any:
        """Load this session in a statement that also reads `columns` (each led by a
        comma) from what `joins` joins to its `s` and its owner `u` (the caller's SQL,
        values as named `parameters`): those columns' values, or None if there is no such
        session. The session is then loaded as on any request, its read taken from this
        statement, so the caller's read costs no query of its own. None too (nothing
        read) where the session was loaded already or has no key."""
        if self.session_key is None or self._loaded:
            return None
        statement = _session_with_owner_sql(columns.as_string(), joins.as_string())
        with connection.cursor() as cursor:
            cursor.execute(statement, {**parameters, "session_key": self.session_key, "now": timezone.now()})
            row = cursor.fetchone()
        self._read_already, more = (None, None) if row is None else _session_with_owner_from_row(row)
        # Any read of the session loads it (SessionBase calls load() on the first read of
        # a session it has not loaded), and load() takes the session just read.
        self.keys()
        # Not taken if the session was emptied or made anew before (load() is not called).
        self._read_already = _UNREAD
        return more

    def load(self) -> dict[str, Any]:
        # Read with its owner, kept for the backend to take. Every signed-in request makes
        # this read: as SQL, 0.8 ms; by the ORM (LoginSession's manager), 2.0 ms; with a
        # reply's message, 1.6 ms against 4.4 (bench/statements.py).
        self._loaded = True
        session, self._read_already = self._read_already, _UNREAD
        if session is _UNREAD:
            with connection.cursor() as cursor:
                statement = _session_with_owner_sql("", "")
                cursor.execute(statement, {"session_key": self.session_key, "now": timezone.now()})
                row = cursor.fetchone()
            session = None if row is None else _session_with_owner_from_row(row)[0]
        if not isinstance(session, LoginSession):
            # No such session, or an expired one: Django's own load, which finds none
            # either and forgets the key, so that a save makes a new session rather than
            # failing on the one gone. A query more, only for a cookie whose session is gone.
            _owner_loaded.set(None)
            return super().load()
        _owner_loaded.set(session.user)
        return self.decode(session.session_data)

    async def aload(self) -> dict[str, Any]:
        # By the ORM, the owner read in the same query (LoginSession's manager).
        self._loaded = True
        try:
            session = await LoginSession.objects.aget(session_key=self.session_key, expire_date__gt=timezone.now())
        except LoginSession.DoesNotExist:
            _owner_loaded.set(None)
            return await super().aload()  # as in load()
        _owner_loaded.set(session.user)
        return self.decode(session.session_data)


@cache
def _session_with_owner_sql(more_columns: str, more_joins: str) -> str:
    """The read of an unexpired session (its key, then now, as the parameters) with its
    owner as `s` and `u`, then `more_columns`, from what `more_joins` joins."""
    owner = get_user_model()
    return text(
        sql.SQL(
            """SELECT {session_columns}, {owner_columns}{more_columns}
            FROM {sessions} s LEFT JOIN {people} u ON u.id = s.user_id {more_joins}
            WHERE s.session_key = %(session_key)s AND s.expire_date > %(now)s"""
        ).format(
            session_columns=columns(LoginSession, "s"),
            owner_columns=columns(owner, "u"),
            more_columns=sql.SQL(more_columns),
            sessions=table(LoginSession),
            people=table(owner),
            more_joins=sql.SQL(more_joins),
        )
    )


def _session_with_owner_from_row(row: Sequence[Any]) -> tuple[LoginSession, Sequence[Any]]:
    """The session (with `.user`, its owner, None for none), and the rest of the row."""
    session_end = column_count(LoginSession)
    owner_end = session_end + column_count(get_user_model())
    session = from_row(LoginSession, row[:session_end])
    session.user = None if session.user_id is None else from_row(get_user_model(), row[session_end:owner_end])
    return session, row[owner_end:]


def _owned(session: LoginSession, data: dict[str, Any]) -> LoginSession:
    # A session is tied to its owner from the login on; an anonymous one has none.
    user_id = data.get("_auth_user_id")
    session.user_id = int(user_id) if user_id is not None and str(user_id).isdigit() else None
    return session
