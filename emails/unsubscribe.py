"""The one-click unsubscribe link in every email: the person's id, signed.

No expiry, on purpose: an email read a year later must still unsubscribe. The signature
uses SECRET_KEY (and SECRET_KEY_FALLBACKS while a key is rotated); the salt keeps these
tokens from being accepted anywhere else a signed id is.
"""

from __future__ import annotations

from django.conf import settings
from django.core import signing
from django.urls import reverse

SALT = "emails.unsubscribe"


def unsubscribe_token(user_id: int) -> str:
    return signing.Signer(salt=SALT).sign(str(user_id))


def user_id_from_token(token: str) -> int | None:
    """The id the token was made for, or None when it was not made by us."""
    try:
        value = signing.Signer(salt=SALT).unsign(token)
    except signing.BadSignature:
        return None
    return int(value) if value.isdigit() else None


def unsubscribe_url(user_id: int) -> str:
    return settings.SITE_URL + reverse("email_unsubscribe", args=[unsubscribe_token(user_id)])


def preferences_url() -> str:
    return settings.SITE_URL + reverse("account") + "#email-preferences"
