"""Sending one planned email, exactly once, however many tasks try at the same time.

The model drafts outside any transaction; the row is claimed with a conditional UPDATE
(emails/claims.py); the person's preferences are read again; only then does SMTP see it,
through the app's own transport (emails/transport.py), which says whether a failure came
before the end of the email or after it, when only a reply could have told.
"""

from __future__ import annotations

import email.policy as email_policy
import logging
import smtplib
import ssl
from collections.abc import Callable
from datetime import datetime, timedelta
from email.utils import formataddr
from enum import StrEnum
from urllib.parse import urlsplit

from django.conf import settings
from django.core.mail import mailers, make_msgid
from django.core.mail.backends.smtp import EmailBackend as SmtpBackend
from django.utils import timezone

from emails.claims import (
    Claim,
    claim_body_going,
    claim_holder,
    claim_record_sent,
    claim_record_unconfirmed,
    claim_release,
    claim_rows,
    email_claim,
)
from emails.drafting import RepetitiveDraft, draft_email
from emails.message import UnfoldedEmail
from emails.models import Email, EmailPreference
from emails.planning import sending_window
from emails.schedule import may_email_at, next_sending_time
from emails.selectors import email_for_sending, email_preference_for_user
from emails.transport import Envelope, SmtpAbandoned, SmtpFailed, SmtpTimeouts, SmtpUnconfirmed, smtp_deliver
from emails.unsubscribe import unsubscribe_url
from infra.dbsteps import release_connection
from infra.llm import LLMError
from memory.models import ProspectiveStatus

logger = logging.getLogger(__name__)

MAILER = "default"
# How long after a retry was due the dispatcher may take the email over (see _retry_due).
RETRY_GRACE = timedelta(minutes=1)
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
    # The whole email went to the server, which never answered its end: not sent again.
    UNCONFIRMED = "sent, unconfirmed"
    # Another task has it, or had it: sent, claimed, or gone.
    NOT_OURS = "not ours"


def email_send(
    *, email_id: int, now: datetime | None = None, worker: str | None = None, retry_in: float | None = None
) -> SendOutcome:
    """Send one planned email, once, however many tasks try at the same time.

    1. Reads the row and the person's preferences: an email they no longer want is
       skipped; one outside their sending hours waits for the next (DEFERRED).
    2. Has the model draft it (no transaction is open), unless a first try did already.
    3. Claims it in the name of `worker` (the Celery node): UPDATE ... WHERE status =
       queued. Zero rows means another task has it.
    4. Reads the preferences again, with the clock as it is now: an unsubscribe while the
       model wrote still counts, and so does a draft that ran past the sending window.
    5. Sends over SMTP, with RFC 5321's waits (emails/transport.py), then records it sent
       (and a check-in's intention raised).

    The time is read at each step (`now` fixes it, for tests). Raises EmailTemporaryFailure
    when a later try may succeed: the row is queued again, due to the dispatcher a little
    after `retry_in` seconds (when the task's own retry should have run). An email whose
    whole text reached the server without a reply to its end is recorded sent-unconfirmed,
    and never sent again.
    """
    clock: Callable[[], datetime] = (lambda: now) if now is not None else timezone.now
    email = email_for_sending(email_id=email_id)
    if email is None or email.status != Status.QUEUED:
        return SendOutcome.NOT_OURS
    if held := _hold_back(email, clock(), status=Status.QUEUED):
        return held
    if email.subject is None:
        drafted = _draft(email, clock(), retry_in=retry_in)
        if isinstance(drafted, SendOutcome):
            return drafted
        email = drafted
    # Made once and kept: every try of this email carries the same Message-ID.
    message_id = email.provider_message_id or make_msgid(domain=urlsplit(settings.SITE_URL).hostname)
    claim = email_claim(email_id=email_id, holder=claim_holder(worker), message_id=message_id, now=clock())
    if claim is None:
        return SendOutcome.NOT_OURS
    email = email_for_sending(email_id=email_id)
    assert email is not None, "a claimed email cannot vanish: erasing the account takes its rows in one transaction"
    # The time after the draft, not before it: two model calls can take it into the
    # person's quiet hours, and then it waits for their next sending time, draft kept.
    if held := _hold_back(email, clock(), status=Status.SENDING, claim=claim):
        return held
    return _send_claimed(email, claim, clock=clock, retry_in=retry_in)


def _send_claimed(email: Email, claim: Claim, *, clock: Callable[[], datetime], retry_in: float | None) -> SendOutcome:
    try:
        _deliver(email, claim=claim, clock=clock)
    except SmtpAbandoned:
        logger.warning("email %s was taken back from this worker before its end went out", email.pk)
        return SendOutcome.NOT_OURS
    except SmtpUnconfirmed as unknown:
        reason = (
            f"the server took the whole email and gave no reply to its end ({describe_smtp_failure(unknown.error)}): "
            "it may have been delivered, so it is not sent again"
        )
        claim_record_unconfirmed(claim, now=clock(), reason=reason)
        return SendOutcome.UNCONFIRMED
    except SmtpFailed as failure:
        reason = describe_smtp_failure(failure)
        if is_temporary_smtp_failure(failure):
            claim_release(claim, send_after=_retry_due(clock(), retry_in), error=reason)
            raise EmailTemporaryFailure(reason) from failure
        logger.error("email %s could not be sent, and will not be: %s", email.pk, reason)
        _finish(email, Status.SENDING, Status.FAILED, reason, claim=claim)
        return SendOutcome.FAILED
    except ValueError as error:
        # An address Django cannot send to: no retry will fix it.
        _finish(email, Status.SENDING, Status.FAILED, f"the address was refused before sending: {error}", claim=claim)
        return SendOutcome.FAILED
    claim_record_sent(claim, now=clock())
    return SendOutcome.SENT


def email_give_up(*, email_id: int, error: str) -> None:
    """The last retry failed too: record it failed, with the error, so it is not lost."""
    Email.objects.filter(pk=email_id, status=Status.QUEUED).update(
        status=Status.FAILED, error=f"gave up after {settings.EMAIL_SEND_MAX_RETRIES} retries: {error}"
    )


def is_temporary_smtp_failure(error: Exception) -> bool:
    """Whether trying again later may succeed: a 4xx reply, a dropped or refused connection,
    a timeout. A 5xx reply is the server's final word."""
    if isinstance(error, SmtpFailed):
        return is_temporary_smtp_failure(error.error)
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
    if isinstance(error, SmtpFailed):
        # A reply says what it was about; a timeout or a reset says nothing of where.
        said = describe_smtp_failure(error.error)
        replied = isinstance(error.error, smtplib.SMTPResponseException | smtplib.SMTPRecipientsRefused)
        return said if replied else f"{said} ({error.phase})"
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


def _hold_back(email: Email, now: datetime, *, status: str, claim: Claim | None = None) -> SendOutcome | None:
    """Skip an email the person no longer wants; keep one back outside their hours."""
    preference = email_preference_for_user(user=email.user)
    if reason := _unwanted_because(email, preference):
        _finish(email, status, Status.SKIPPED, reason, claim=claim)
        return SendOutcome.SKIPPED
    hours = preference.hours
    if may_email_at(now, hours, sending_window()):
        return None
    send_at = next_sending_time(now, hours, sending_window())
    if send_at is None:
        _finish(email, status, Status.SKIPPED, "their quiet hours cover the whole sending window", claim=claim)
        return SendOutcome.SKIPPED
    rows = claim_rows(claim) if claim is not None else Email.objects.filter(pk=email.pk, status=status)
    rows.update(status=Status.QUEUED, claimed_at=None, claimed_by="", claim_token=None, send_after=send_at)
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
    if email.kind == Kind.SESSION_SUMMARY and (email.session is None or not email.session.summary.strip()):
        # Deleted since it was planned: a recap is never drafted from nothing.
        return "the conversation or its summary was deleted"
    if email.kind == Kind.CHECK_IN and (email.memory is None or email.memory.status != ProspectiveStatus.OPEN):
        return "the intention was closed or deleted before the check-in went out"
    return None


def _draft(email: Email, now: datetime, *, retry_in: float | None) -> Email | SendOutcome:
    """The email with its draft saved, or what became of it instead."""
    try:
        written = draft_email(email=email, now=now)
    except LLMError as error:
        if error.retryable:
            Email.objects.filter(pk=email.pk, status=Status.QUEUED).update(
                error=f"the model could not write it yet: {error}", send_after=_retry_due(now, retry_in)
            )
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


def _deliver(email: Email, *, claim: Claim, clock: Callable[[], datetime]) -> None:
    link = unsubscribe_url(email.user_id)
    message = UnfoldedEmail(
        subject=email.subject or "",
        body=email.body_text or "",
        # Their name where they gave one: mail clients show it, and it reads as written to them.
        to=[formataddr((email.user.name, email.user.email)) if email.user.name else email.user.email],
        headers={
            "Message-ID": email.provider_message_id,
            # RFC 8058: mail clients show an unsubscribe button that POSTs here, no cookies.
            "List-Unsubscribe": f"<{link}>",
            "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
        },
    )
    if email.body_html:
        message.attach_alternative(email.body_html, "text/html")
    mailer = mailers[MAILER]
    if not isinstance(mailer, SmtpBackend):
        # The console in development, memory in tests: nothing to wait for, nothing unknown.
        mailer.send_messages([message])
        return

    def body_going() -> bool:
        going = claim_body_going(claim, now=clock())
        # The server may take up to ten minutes to answer: no connection is held meanwhile.
        release_connection()
        return going

    envelope = Envelope(
        sender=mailer.prep_address(message.from_email),
        recipients=[mailer.prep_address(address) for address in message.recipients()],
        message=message.message(policy=email_policy.SMTP).as_bytes(),
    )
    release_connection()
    smtp_deliver(mailer=mailer, envelope=envelope, timeouts=SmtpTimeouts.from_settings(), before_end_of_data=body_going)


def _retry_due(now: datetime, retry_in: float | None) -> datetime:
    """When the dispatcher may hand out an email given back for a retry: a minute after the
    task's own retry was due. So the retry runs first, and an email whose retry was lost
    with its worker (a countdown is held by the worker, outside its prefetch) is sent all
    the same, minutes later rather than at the broker's redelivery."""
    wait = settings.EMAIL_RETRY_BACKOFF_SECONDS if retry_in is None else retry_in
    return now + timedelta(seconds=wait) + RETRY_GRACE


def _finish(email: Email, status: str, outcome: str, reason: str, *, claim: Claim | None = None) -> None:
    rows = claim_rows(claim) if claim is not None else Email.objects.filter(pk=email.pk, status=status)
    rows.update(status=outcome, error=reason, claimed_at=None, claim_token=None)
    if outcome == Status.FAILED:
        logger.warning("email %s failed: %s", email.pk, reason)


def _text(message: bytes | str) -> str:
    return message.decode(errors="replace") if isinstance(message, bytes) else str(message)
