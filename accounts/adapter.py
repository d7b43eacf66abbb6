"""allauth's adapters: where the app differs from allauth's defaults.

Mail (a sign-up confirmation, a password reset, a sign-in code) is queued in the database
and sent by a task, never from the request: an SMTP server that is down or slow then
delays the mail instead of failing the page, and the rate limit it counts against is
spent on mail that does go out. Every account mail speaks as the product: SITE_NAME in
its subject and signature, its links on SITE_URL. Second-factor secrets are encrypted
like memories."""

from __future__ import annotations

import html
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from allauth.account.adapter import DefaultAccountAdapter
from allauth.core import context as allauth_context
from allauth.mfa.adapter import DefaultMFAAdapter
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.hashers import make_password
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.urls import reverse

from accounts.time_zones import known_zone
from emails.outbox import mail_queue
from infra.encryption import decrypt, encrypt

# Links allauth puts in a mail's context, built from the request's host: rebuilt on SITE_URL.
LINKS_IN_MAIL = ("activate_url", "password_reset_url", "signup_url")

EMAIL_CONFIRMED = "account/messages/email_confirmed.txt"
SIGNED_IN = "account/messages/logged_in.txt"
CONFIRMED_AND_SIGNED_IN = "account/messages/email_confirmed_and_signed_in.txt"
# The address this request confirmed, remembered on the request: when confirming it also
# signs the person in, the "signed in" message that follows replaces "confirmed".
_CONFIRMED_EMAIL = "_account_confirmed_email"


@dataclass(frozen=True)
class Site:
    """What account mail calls the product: its name and its public domain (allauth's
    templates read `current_site.name` and `current_site.domain`)."""

    name: str
    domain: str


def site() -> Site:
    return Site(name=settings.SITE_NAME, domain=urlsplit(settings.SITE_URL).netloc)


def on_site(url: str) -> str:
    """`url`'s path and query on SITE_URL: links in mail never carry the host a request
    happened to name (a forged Host header cannot point a reset link elsewhere)."""
    parts = urlsplit(url)
    return settings.SITE_URL + parts.path + (f"?{parts.query}" if parts.query else "")


class AccountAdapter(DefaultAccountAdapter):  # type: ignore[misc]  # allauth ships no types
    def send_mail(self, template_prefix: str, email: str, context: dict[str, Any]) -> None:
        # What allauth's own send_mail puts in every mail's context, in the product's name;
        # then the mail is queued.
        current = site()
        context = {
            "request": allauth_context.request,
            "email": email,
            "current_site": current,
            "site_name": current.name,
            "site_domain": current.domain,
            "site_url": settings.SITE_URL,
            **context,
        }
        for name in LINKS_IN_MAIL:
            if isinstance(context.get(name), str):
                context[name] = on_site(context[name])
        mail_queue(self.render_mail(template_prefix, email, context))

    def send_account_already_exists_mail(self, email: str) -> None:
        # A sign-up for a registered address does the slow work a new one does (hashing a
        # password), so its answer takes as long and timing cannot tell the two apart.
        make_password(secrets.token_urlsafe(32))
        super().send_account_already_exists_mail(email)

    def format_email_subject(self, subject: str) -> str:
        return f"{settings.SITE_NAME}: {subject}"

    def send_notification_mail(
        self,
        template_prefix: str,
        user: AbstractBaseUser,
        context: dict[str, Any] | None = None,
        email: str | None = None,
    ) -> None:
        """A security notice (password or address changed): it names the person, says when
        in their own time zone, and links to the password reset for "this wasn't me"."""
        extra = {
            "user": user,
            "time_zone": _zone_name(user),
            "password_reset_url": settings.SITE_URL + reverse("account_reset_password"),
            **(context or {}),
        }
        super().send_notification_mail(template_prefix, user, extra, email)

    def add_message(
        self,
        request: HttpRequest,
        level: int,
        message_template: str | None = None,
        message_context: dict[str, Any] | None = None,
        extra_tags: str = "",
        message: str | None = None,
    ) -> None:
        """allauth's flash messages, one at a time: confirming an address that also signs the
        person in says both in one message, not two stacked."""
        confirmed = getattr(request, _CONFIRMED_EMAIL, None)
        if message_template == SIGNED_IN and confirmed is not None:
            setattr(request, _CONFIRMED_EMAIL, None)
            _drop_message(request, _rendered(EMAIL_CONFIRMED, {"email": confirmed}, request))
            message_template, message_context = CONFIRMED_AND_SIGNED_IN, {"email": confirmed}
        elif message_template == EMAIL_CONFIRMED:
            setattr(request, _CONFIRMED_EMAIL, (message_context or {}).get("email", ""))
        super().add_message(request, level, message_template, message_context, extra_tags, message)


def _rendered(template: str, context: dict[str, Any], request: HttpRequest) -> str:
    """A message as allauth's add_message renders it."""
    return html.unescape(render_to_string(template, context, request).strip())


def _drop_message(request: HttpRequest, text: str) -> None:
    """Take one message back out of this request's messages. Reading the storage marks all
    it holds as shown, so every other message is put back as it was."""
    storage = messages.get_messages(request)
    if isinstance(storage, list):
        # No message storage on this request (its middleware did not run): nothing to take.
        return
    kept = list(storage)
    for index, queued in enumerate(kept):
        if str(queued.message) == text:
            del kept[index]
            break
    for queued in kept:
        storage.add(queued.level, queued.message, queued.extra_tags)


def _zone_name(user: AbstractBaseUser) -> str:
    return known_zone(getattr(user, "time_zone", ""))


class MfaAdapter(DefaultMFAAdapter):  # type: ignore[misc]  # allauth ships no types
    """Authenticator secrets and recovery codes are stored encrypted, with the same keys as
    memories (a stolen database dump does not hand over anyone's second factor)."""

    def encrypt(self, text: str) -> str:
        return encrypt(text)

    def decrypt(self, encrypted_text: str) -> str:
        return decrypt(encrypted_text)
