"""Sending one planned email, exactly once, however many tasks try at the same time.

The model drafts outside any transaction; the row is claimed with a conditional UPDATE;
the person's preferences are read again; only then does SMTP see it.
"""

from __future__ import annotations

import logging
import smtplib
import ssl
from datetime import datetime, timedelta
from email.utils import formataddr
from enum import StrEnum
from urllib.parse import urlsplit

from django.conf import settings
from django.core.mail import make_msgid
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from emails.drafting import RepetitiveDraft, draft_email
from emails.message import UnfoldedEmail
from emails.models import Email, EmailPreference
from emails.planning import lease_from, sending_window
from emails.schedule import may_email_at, next_sending_time
from emails.selectors import email_for_sending, email_preference_for_user
from emails.unsubscribe import unsubscribe_url
from infra.llm import LLMError
from memory.models import ProspectiveStatus
from memory.services import prospective_memory_raise

logger = logging.getLogger(__name__)

MAILER = "default"
Status = Email.Status
Kind = Email.Kind


class EmailTemporaryFailure(Exception):
    """Sending may work later: an SMTP 4xx, a dropped connection, a model outage."""


class SendOutcome(StrEnum):
    SENT = "sent"
    SKIPPED = "skipped"
    FAILED = "failed"
    # Kept back until the person's next sending time; the dispatcher sends it then.
    DEFERRED = "deferred"
    # Another task has it, or had it: sent, claimed, or gone.
    NOT_OURS = "not ours"


def email_send(*, email_id: int, now: datetime | None = None) -> SendOutcome:
    """Send one planned email, once, however many tasks try at the same time.

    1. Reads the row and the person's preferences: an email they no longer want is
       skipped; one outside their sending hours waits for the next (DEFERRED).
    2. Has the model draft it (no transaction is open), unless a first try did already.
    3. Claims it: UPDATE ... WHERE status = queued. Zero rows means another task has it.
    4. Reads the preferences again: an unsubscribe while the model wrote still counts.
    5. Sends over SMTP, then records it sent (and a check-in's intention raised).

    Raises EmailTemporaryFailure when a later try may succeed; the row is queued again.
    A redelivered task may take over a claim older than EMAIL_CLAIM_STALE_SECONDS: the
    worker that made it died. If it died after the SMTP server accepted the email but
    before recording it, the email goes out twice (with the same Message-ID); refusing
    would drop every email whose worker died before sending. A window of milliseconds
    against a lost email: we take the duplicate.
    """
    now = now or timezone.now()
    email = email_for_sending(email_id=email_id)
    if email is None or not _claimable(email, now):
        return SendOutcome.NOT_OURS
    if email.status == Status.QUEUED:
        if held := _hold_back(email, now, status=Status.QUEUED):
            return held
        if email.subject is None:
            drafted = _draft(email, now)
            if isinstance(drafted, SendOutcome):
                return drafted
            email = drafted
    message_id = email.provider_message_id or make_msgid(domain=urlsplit(settings.SITE_URL).hostname)
    if not _claim(email, message_id=message_id, now=now):
        return SendOutcome.NOT_OURS
    email = email_for_sending(email_id=email_id)
    assert email is not None, "a claimed email cannot vanish: erasing the account takes its rows in one transaction"
    if held := _hold_back(email, now, status=Status.SENDING):
        return held
    try:
        _deliver(email, message_id=message_id)
    except (smtplib.SMTPException, OSError) as error:
        reason = describe_smtp_failure(error)
        if is_temporary_smtp_failure(error):
            _release(email, now=now, error=reason, claimed=True)
            raise EmailTemporaryFailure(reason) from error
        logger.error("email %s could not be sent, and will not be: %s", email.pk, reason)
        _finish(email, Status.SENDING, Status.FAILED, reason)
        return SendOutcome.FAILED
    except ValueError as error:
        # An address Django cannot send to: no retry will fix it.
        _finish(email, Status.SENDING, Status.FAILED, f"the address was refused before sending: {error}")
        return SendOutcome.FAILED
    _record_sent(email, now=now)
    return SendOutcome.SENT


def email_give_up(*, email_id: int, error: str) -> None:
    """The last retry failed too: record it failed, with the error, so it is not lost."""
    Email.objects.filter(pk=email_id, status=Status.QUEUED).update(
        status=Status.FAILED, error=f"gave up after {settings.EMAIL_SEND_MAX_RETRIES} retries: {error}"
    )


def is_temporary_smtp_failure(error: Exception) -> bool:
    """Whether trying again later may succeed: a 4xx reply, a dropped or refused connection,
    a timeout. A 5xx reply is the server's final word."""
    if isinstance(error, smtplib.SMTPRecipientsRefused):
        return all(400 <= code < 500 for code, _ in error.recipients.values())
    if isinstance(error, smtplib.SMTPResponseException):
        return 400 <= error.smtp_code < 500
    if isinstance(error, smtplib.SMTPServerDisconnected):
        return True
    if isinstance(error, ssl.SSLError):
        # A handshake that failed (a plain port, a certificate for another name) fails
        # the same way next time: it is the configuration, not the network.
        return False
    # smtplib's other errors (no STARTTLS, say) are about this server's configuration;
    # what remains is the network: refused, reset, timed out.
    return not isinstance(error, smtplib.SMTPException) and isinstance(error, OSError)


def describe_smtp_failure(error: Exception) -> str:
    if isinstance(error, smtplib.SMTPRecipientsRefused):
        refusals = "; ".join(f"{code} {_text(message)}" for code, message in error.recipients.values())
        return f"SMTP refused the recipient: {refusals}"
    if isinstance(error, smtplib.SMTPResponseException):
        return f"SMTP {error.smtp_code}: {_text(error.smtp_error)}"
    if isinstance(error, smtplib.SMTPNotSupportedError) and "STARTTLS" in str(error):
        return (
            f"the mail server at {_mail_server()} does not offer TLS, and EMAIL_USE_TLS is true: "
            "set EMAIL_USE_TLS=false for a server without TLS (a local mail catcher), or use one that has it"
        )
    if isinstance(error, ssl.SSLError):
        return (
            f"TLS with the mail server at {_mail_server()} failed ({error.reason or error}): "
            "check EMAIL_PORT (587 for STARTTLS) and that the server's certificate is for EMAIL_HOST"
        )
    return f"{type(error).__name__}: {error}"


def _mail_server() -> str:
    options = settings.MAILERS.get("default", {}).get("OPTIONS", {})
    return f"{options.get('host', '?')}:{options.get('port', '?')}"


def _claimable(email: Email, now: datetime) -> bool:
    stale = now - timedelta(seconds=settings.EMAIL_CLAIM_STALE_SECONDS)
    if email.status == Status.QUEUED:
        return True
    return email.status == Status.SENDING and email.claimed_at is not None and email.claimed_at < stale


def _hold_back(email: Email, now: datetime, *, status: str) -> SendOutcome | None:
    """Skip an email the person no longer wants; keep one back outside their hours."""
    preference = email_preference_for_user(user=email.user)
    if reason := _unwanted_because(email, preference):
        _finish(email, status, Status.SKIPPED, reason)
        return SendOutcome.SKIPPED
    hours = preference.hours
    if may_email_at(now, hours, sending_window()):
        return None
    send_at = next_sending_time(now, hours, sending_window())
    if send_at is None:
        _finish(email, status, Status.SKIPPED, "their quiet hours cover the whole sending window")
        return SendOutcome.SKIPPED
    Email.objects.filter(pk=email.pk, status=status).update(status=Status.QUEUED, claimed_at=None, send_after=send_at)
    return SendOutcome.DEFERRED


def _unwanted_because(email: Email, preference: EmailPreference) -> str | None:
    if preference.unsubscribed_at is not None:
        return "they unsubscribed"
    if not email.user.is_active:
        return "the account is deactivated"
    if not preference.chosen:
        return "they have not chosen how often the coach may write"
    if not email.user.memory_enabled:
        # Every kind is drawn on what the coach remembers (see the account page).
        return "they turned memory off"
    if email.session is not None and not email.session.remembered:
        return "the conversation is not remembered"
    if email.kind in (Kind.NUDGE, Kind.CHECK_IN) and preference.frequency == EmailPreference.Frequency.OFF:
        return "they turned the coach's emails off"
    if email.kind == Kind.SESSION_SUMMARY and not preference.session_summaries:
        return "they no longer want session recaps"
    if email.kind == Kind.CHECK_IN and (email.memory is None or email.memory.status != ProspectiveStatus.OPEN):
        return "the intention was closed or deleted before the check-in went out"
    return None


def _draft(email: Email, now: datetime) -> Email | SendOutcome:
    """The email with its draft saved, or what became of it instead."""
    try:
        written = draft_email(email=email, now=now)
    except LLMError as error:
        if error.retryable:
            _release(email, now=now, error=f"the model could not write it yet: {error}", claimed=False)
            raise EmailTemporaryFailure(str(error)) from error
        _finish(email, Status.QUEUED, Status.FAILED, f"the model could not write it: {error}")
        return SendOutcome.FAILED
    if isinstance(written, RepetitiveDraft):
        # Kept for the record (the admin can see what was not sent, and why).
        Email.objects.filter(pk=email.pk, status=Status.QUEUED, subject__isnull=True).update(
            status=Status.SKIPPED,
            error=written.reason,
            subject=written.draft.subject,
            body_text=written.draft.body,
        )
        return SendOutcome.SKIPPED
    # Conditional, like the claim: when two deliveries of the task draft at once, the
    # first draft saved is the one sent; the other is dropped here.
    Email.objects.filter(pk=email.pk, status=Status.QUEUED, subject__isnull=True).update(
        subject=written.subject,
        body_text=written.body_text,
        body_html=written.body_html,
        embedding=written.embedding.vector,
        embedding_model=written.embedding.model,
    )
    current = email_for_sending(email_id=email.pk)
    return current if current is not None and current.status == Status.QUEUED else SendOutcome.NOT_OURS


def _claim(email: Email, *, message_id: str, now: datetime) -> bool:
    # The only way into `sending`: one conditional UPDATE, so of any number of tasks
    # racing for the row, exactly one sees a row updated.
    stale = now - timedelta(seconds=settings.EMAIL_CLAIM_STALE_SECONDS)
    claimed = (
        Email.objects.filter(pk=email.pk, subject__isnull=False)
        .filter(Q(status=Status.QUEUED) | Q(status=Status.SENDING, claimed_at__lt=stale))
        .update(status=Status.SENDING, claimed_at=now, attempts=F("attempts") + 1, provider_message_id=message_id)
    )
    return claimed == 1


def _deliver(email: Email, *, message_id: str) -> None:
    link = unsubscribe_url(email.user_id)
    message = UnfoldedEmail(
        subject=email.subject or "",
        body=email.body_text or "",
        # Their name where they gave one: mail clients show it, and it reads as written to them.
        to=[formataddr((email.user.name, email.user.email)) if email.user.name else email.user.email],
        headers={
            "Message-ID": message_id,
            # RFC 8058: mail clients show an unsubscribe button that POSTs here, no cookies.
            "List-Unsubscribe": f"<{link}>",
            "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
        },
    )
    if email.body_html:
        message.attach_alternative(email.body_html, "text/html")
    message.send(using=MAILER)


def _release(email: Email, *, now: datetime, error: str, claimed: bool) -> None:
    """Give the row back for a retry: queued, with the error, and a lease so the
    dispatcher leaves it to the task's own retry. A claim is released only if it is ours."""
    rows = Email.objects.filter(pk=email.pk)
    rows = rows.filter(status=Status.SENDING, claimed_at=now) if claimed else rows.filter(status=Status.QUEUED)
    rows.update(status=Status.QUEUED, claimed_at=None, error=error, send_after=lease_from(now))


def _record_sent(email: Email, *, now: datetime) -> None:
    with transaction.atomic():
        # It went out: recorded whoever holds the row now (a dispatcher may have queued it
        # again after a very slow send), so nobody sends it a second time.
        recorded = Email.objects.filter(pk=email.pk, status__in=[Status.SENDING, Status.QUEUED]).update(
            status=Status.SENT, sent_at=now, error=""
        )
        if not recorded:
            logger.warning("email %s went out, but another task had already finished it", email.pk)
        if recorded and email.kind == Kind.CHECK_IN and email.memory_id is not None:
            prospective_memory_raise(
                user=email.user, memory_id=email.memory_id, reason="asked about it in a check-in email", now=now
            )


def _finish(email: Email, status: str, outcome: str, reason: str) -> None:
    Email.objects.filter(pk=email.pk, status=status).update(status=outcome, error=reason, claimed_at=None)
    if outcome == Status.FAILED:
        logger.warning("email %s failed: %s", email.pk, reason)


def _text(message: bytes | str) -> str:
    return message.decode(errors="replace") if isinstance(message, bytes) else str(message)
