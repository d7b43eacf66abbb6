"""Text encrypted at rest with Fernet, under keys from FIELD_ENCRYPTION_KEYS (newest first).

The first key encrypts; every key decrypts, so a new key can be put in front and old rows
re-encrypted in the background (`manage.py rotate_encryption_keys`). A value no key can
decrypt raises DecryptionError: ciphertext is never handed on as if it were text.

Encrypted text cannot be looked up in SQL (the same text encrypts differently each time).
Where a value must be found, it is stored beside its lookup digest: HMAC-SHA256 under
FIELD_LOOKUP_KEY, a secret of its own, so the digest says nothing to whoever lacks it and
stays the same while encryption keys rotate.
"""

from __future__ import annotations

import hashlib
import hmac
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import models


class DecryptionError(Exception):
    """Stored text that none of the configured keys can decrypt."""


def encrypt(text: str) -> str:
    return _keyring(tuple(settings.FIELD_ENCRYPTION_KEYS)).encrypt(text.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return _keyring(tuple(settings.FIELD_ENCRYPTION_KEYS)).decrypt(token.encode()).decode()
    except InvalidToken:
        raise DecryptionError("stored text could not be decrypted with any FIELD_ENCRYPTION_KEYS key") from None


def reencrypt(token: str) -> str:
    """The same text under the newest key."""
    try:
        return _keyring(tuple(settings.FIELD_ENCRYPTION_KEYS)).rotate(token.encode()).decode()
    except InvalidToken:
        raise DecryptionError("stored text could not be decrypted with any FIELD_ENCRYPTION_KEYS key") from None


def lookup_digest(text: str) -> str:
    """The keyed hash by which an encrypted value is found: 64 hex characters."""
    return hmac.new(lookup_key(), text.encode(), hashlib.sha256).hexdigest()


def lookup_key() -> bytes:
    """FIELD_LOOKUP_KEY, the secret of every keyed hash the app looks things up by."""
    return _lookup_key(settings.FIELD_LOOKUP_KEY)


@lru_cache(maxsize=2)
def _lookup_key(secret: str) -> bytes:
    if len(secret) < 32:
        raise ImproperlyConfigured("FIELD_LOOKUP_KEY must be a secret of at least 32 characters.")
    return secret.encode()


@lru_cache(maxsize=4)
def _keyring(keys: tuple[str, ...]) -> MultiFernet:
    try:
        return MultiFernet([Fernet(key) for key in keys])
    except (ValueError, TypeError):
        raise ImproperlyConfigured(
            "FIELD_ENCRYPTION_KEYS must be comma-separated Fernet keys (32 url-safe base64-encoded bytes each)."
        ) from None


if TYPE_CHECKING:
    _TextField = models.TextField
else:
    # Generic in the types it is set and read as (None added where null=True), as
    # django-stubs types Django's fields; Django's own cannot be subscripted.
    class _TextField[ST, GT](models.TextField):
        pass


class EncryptedTextField[ST, GT](_TextField[ST, GT]):
    """A TextField stored as a Fernet token. Only `isnull` can be looked up: the ciphertext
    of the same text differs every time, so equality or containment in SQL means nothing."""

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> str | None:
        return None if value is None else decrypt(value)

    def get_prep_value(self, value: Any) -> str | None:
        value = super().get_prep_value(value)
        return None if value is None else encrypt(value)

    def get_lookup(self, lookup_name: str) -> Any:
        return super().get_lookup(lookup_name) if lookup_name == "isnull" else None
