"""The authentication backends (AUTHENTICATION_BACKENDS): Django's and allauth's, except
that the person a request's login session was loaded with (accounts/sessions.py, one
query for both) is handed back as its user instead of being read a second time.

Everything else is theirs: the password and email checks, whether the person may sign in
at all (an inactive one may not), and the session's auth hash, which Django verifies on
whatever user this returns (a changed password still signs the other sessions out)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from allauth.account.auth_backends import AuthenticationBackend as AllauthBackend
from django.contrib.auth.backends import ModelBackend as DjangoModelBackend

from accounts.sessions import owner_loaded_with_session

if TYPE_CHECKING:
    from accounts.models import User


class _SessionOwnerFirst(DjangoModelBackend):
    # Before allauth's backend in AuthenticationBackend's MRO (allauth's derives from
    # Django's), so super() is allauth's there and Django's in ModelBackend.
    def get_user(self, user_id: Any) -> User | None:
        owner = owner_loaded_with_session(user_id)
        if owner is None:
            return super().get_user(user_id)
        return owner if self.user_can_authenticate(owner) else None

    async def aget_user(self, user_id: Any) -> User | None:
        owner = owner_loaded_with_session(user_id)
        if owner is None:
            return await super().aget_user(user_id)
        return owner if self.user_can_authenticate(owner) else None


class ModelBackend(_SessionOwnerFirst):
    pass


class AuthenticationBackend(_SessionOwnerFirst, AllauthBackend):  # type: ignore[misc]  # allauth ships no types
    pass
