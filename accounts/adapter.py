"""allauth's adapters: where the app differs from allauth's defaults.

Mail (a sign-up confirmation, a password reset, a sign-in code) is queued in the database
and sent by a task, never from the request: an SMTP server that is down or slow then
delays the mail instead of failing the page, and the rate limit it counts against is
spent on mail that does go out. Second-factor secrets are encrypted like memories."""

from __future__ import annotations

from typing import Any

from allauth.account.adapter import DefaultAccountAdapter
from allauth.core import context as allauth_context
from allauth.mfa.adapter import DefaultMFAAdapter
from django.contrib.sites.shortcuts import get_current_site

from emails.outbox import mail_queue
from infra.encryption import decrypt, encrypt


class AccountAdapter(DefaultAccountAdapter):
    def send_mail(self, template_prefix: str, email: str, context: dict[str, Any]) -> None:
        # What allauth's own send_mail puts in every mail's context, then the mail queued.
        request = allauth_context.request
        context = {"request": request, "email": email, "current_site": get_current_site(request), **context}
        mail_queue(self.render_mail(template_prefix, email, context))


class MfaAdapter(DefaultMFAAdapter):
    """Authenticator secrets and recovery codes are stored encrypted, with the same keys as
    memories (a stolen database dump does not hand over anyone's second factor)."""

    def encrypt(self, text: str) -> str:
        return encrypt(text)

    def decrypt(self, encrypted_text: str) -> str:
        return decrypt(encrypted_text)
