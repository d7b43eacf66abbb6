"""Sessions as allauth leaves them after a real sign-in (with a password, and a second
factor for staff), and authenticator apps for staff, for tests past the sign-in itself."""

from __future__ import annotations

import time

from allauth.account.internal.flows.login import AUTHENTICATION_METHODS_SESSION_KEY
from allauth.mfa.totp.internal.auth import TOTP, format_hotp_value, generate_totp_secret, hotp_value
from django.test import Client

from accounts.models import User


def with_authenticator(user: User) -> str:
    """Set up an authenticator app for `user`; its secret, to make codes with."""
    secret = generate_totp_secret()
    TOTP.activate(user, secret)
    return secret


def code_now(secret: str) -> str:
    """The code the authenticator app shows now."""
    return format_hotp_value(hotp_value(secret, int(time.time()) // 30))


def signed_in_just_now(client: Client, user: User, *, second_factor: bool = False) -> Client:
    """`client` signed in as `user`, who gave their password again (and a code) a moment
    ago: what asks for that (export, a new address, a new password, the admin) is satisfied."""
    client.force_login(user)
    records = [{"method": "password", "at": time.time(), "email": user.email, "reauthenticated": True}]
    if second_factor:
        records.append({"method": "mfa", "at": time.time(), "type": "totp"})
    session = client.session
    session[AUTHENTICATION_METHODS_SESSION_KEY] = records
    session["account_authentication_methods_user"] = str(user.pk)
    session.save()
    return client


def staff_client(user: User) -> Client:
    """A client signed in as `user` in a session that used the second factor, as after
    allauth's sign-in with a code (the full flow is tested in test_admin_security.py)."""
    if not user.authenticator_set.exists():
        with_authenticator(user)
    return signed_in_just_now(Client(), user, second_factor=True)
