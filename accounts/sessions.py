"""The session engine (SESSION_ENGINE = "accounts.sessions"): Django's database sessions,
stored with the user they belong to (accounts.models.LoginSession).

A session is loaded with its owner, in one query; the authentication backends
(accounts/backends.py) take that owner as the request's user rather than asking the
database for the same row again."""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore

from accounts.models import LoginSession

if TYPE_CHECKING:
    from accounts.models import User

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


class SessionStore(DatabaseSessionStore):
    @classmethod
    def get_model_class(cls) -> type[LoginSession]:
        return LoginSession

    def create_model_instance(self, data: dict[str, Any]) -> LoginSession:
        return _owned(super().create_model_instance(data), data)

    async def acreate_model_instance(self, data: dict[str, Any]) -> LoginSession:
        # Saved from async code (an async login) as from sync: with its owner.
        return _owned(await super().acreate_model_instance(data), data)

    def _get_session_from_db(self) -> LoginSession | None:
        # Read with its owner in the same query (LoginSession's manager), kept for the
        # authentication backend to take.
        session = super()._get_session_from_db()
        _owner_loaded.set(session.user if session is not None else None)
        return session

    async def _aget_session_from_db(self) -> LoginSession | None:
        session = await super()._aget_session_from_db()
        _owner_loaded.set(session.user if session is not None else None)
        return session


def _owned(session: LoginSession, data: dict[str, Any]) -> LoginSession:
    # A session is tied to its owner from the login on; an anonymous one has none.
    user_id = data.get("_auth_user_id")
    session.user_id = int(user_id) if user_id is not None and str(user_id).isdigit() else None
    return session
