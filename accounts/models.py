"""People who are coached (an email address is the login, there is no username), and
their login sessions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, BaseUserManager, PermissionsMixin
from django.contrib.sessions.base_session import AbstractBaseSession, BaseSessionManager
from django.db import models
from django.utils import timezone
from django.utils.module_loading import import_string

if TYPE_CHECKING:
    from django.contrib.sessions.backends.base import SessionBase

DEFAULT_TIME_ZONE = "UTC"


class UserManager(BaseUserManager["User"]):
    use_in_migrations = True

    def create_user(self, email: str, password: str | None = None, **fields: Any) -> User:
        if not email:
            raise ValueError("A user needs an email address.")
        user = self.model(email=self.normalize_email(email).lower(), **fields)
        user.set_password(password)
        user.save(using=self._db)
        return user

    def create_superuser(self, email: str, password: str | None = None, **fields: Any) -> User:
        fields.update(is_staff=True, is_superuser=True)
        return self.create_user(email, password, **fields)


class User(AbstractBaseUser, PermissionsMixin):
    email = models.EmailField(unique=True)
    name = models.CharField(max_length=150, blank=True, help_text="What the coach calls you.")
    is_staff = models.BooleanField(default=False)
    is_active = models.BooleanField(default=True)
    date_joined = models.DateTimeField(default=timezone.now)
    # Set when the onboarding form is answered or skipped; until then login leads there.
    onboarded_at = models.DateTimeField(null=True, blank=True)
    # When the person last deleted all their memories: an undo of an earlier deletion no
    # longer applies (it would bring back what they asked to have forgotten).
    memories_deleted_all_at = models.DateTimeField(null=True, blank=True)
    # The person's own clock: dates are shown in it, quiet hours and "the morning of a
    # date" are read by it. An IANA name; every layer may read it off the user.
    time_zone = models.CharField(max_length=64, default=DEFAULT_TIME_ZONE)
    # Off: the coach neither reads nor writes memories (no memory block, no memory tools,
    # no summaries, no weekly episodes, no follow-up emails). The memories stay, for the
    # person to see and edit, and are used again once it is back on. Every layer reads it
    # off the user.
    memory_enabled = models.BooleanField(default=True, db_default=True)

    objects = UserManager()

    USERNAME_FIELD = "email"
    EMAIL_FIELD = "email"
    REQUIRED_FIELDS: ClassVar[list[str]] = []

    def __str__(self) -> str:
        return self.email


class LoginSessionManager(BaseSessionManager["LoginSession"]):
    def get_queryset(self) -> models.QuerySet[LoginSession]:
        # A session is read with its owner, in the same query: the request's user is that
        # owner (accounts/backends.py), not a second read of the same person.
        return super().get_queryset().select_related("user")


class LoginSession(AbstractBaseSession):
    """A login session (Django's session table, with its owner): erasing a person erases
    their sessions in the same statement, and nothing has to decode every session to find
    theirs. See accounts/sessions.py, the SESSION_ENGINE that fills in `user`."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.DB_CASCADE, null=True, blank=True, related_name="login_sessions"
    )

    objects: ClassVar[LoginSessionManager] = LoginSessionManager()

    class Meta:
        db_table = "accounts_login_session"

    @classmethod
    def get_session_store_class(cls) -> type[SessionBase]:
        # The engine names this model, so the model finds the engine by its setting: no
        # import of it here, which would make the two import each other.
        store: type[SessionBase] = import_string(f"{settings.SESSION_ENGINE}.SessionStore")
        return store
