"""The session engine (SESSION_ENGINE = "accounts.sessions"): Django's database sessions,
stored with the user they belong to (accounts.models.LoginSession)."""

from __future__ import annotations

from typing import Any

from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore

from accounts.models import LoginSession


class SessionStore(DatabaseSessionStore):
    @classmethod
    def get_model_class(cls) -> type[LoginSession]:
        return LoginSession

    def create_model_instance(self, data: dict[str, Any]) -> LoginSession:
        session = super().create_model_instance(data)
        # A session is tied to its owner from the login on; an anonymous one has none.
        user_id = data.get("_auth_user_id")
        session.user_id = int(user_id) if user_id is not None and str(user_id).isdigit() else None
        return session
