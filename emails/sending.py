"""Sending one planned email, exactly once, however many tasks try at the same time.

A send task claims the email first (emails/claims.py), `drafting` while the model writes
it outside any transaction, then `sending`, and keeps the claim alive with a heartbeat the
whole while: a worker killed at any point leaves an email the sweep hands on within
seconds. The person's preferences are read again after the draft; only then does SMTP see
it, by the rule every mail of the app is sent by (emails/delivery.py), which says whether
a failure came before the end of the email or after it, when only a reply could have told.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from email.utils import formataddr
from enum import StrEnum
from urllib.parse import urlsplit

from django.conf import settings
from django.core.mail import make_msgid
from django.utils import timezone

from emails.claims import Claim, claim_end, claim_holder, claim_kept_alive, claim_release, claim_rows, claim_take
from emails.delivery import Delivered, Outcome, claimed_mail_deliver
from emails.drafting import RepetitiveDraft, draft_email
from emails.ledger import email_record_sent, email_record_unconfirmed
from emails.message import UnfoldedEmail
from emails.models import Email, EmailPreference
from emails.planning import sending_window
from emails.schedule import may_email_at, next_sending_time
from emails.selectors import email_for_sending, email_preference_for_user
from emails.unsubscribe import unsubscribe_url
from infra.llm import LLMError
from memory.models import ProspectiveStatus

logger = logging.getLogger(__name__)

# How long after its retry was due the dispatcher may take the email over (see _retry_due).
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
    2. Claims it in the name of `worker` (the Celery node) and this process: UPDATE ...
       WHERE status = queued. Zero rows means another task has it. From here to the end,
       the claim beats.
    3. Has the model draft it (no transaction is open), unless a first try did already.
    4. Reads the preferences again, with the clock as it is now: an unsubscribe while the
       model wrote still counts, and so does a draft that ran past the sending window.
    5. Sends it (emails/delivery.py), then records it sent (and a check-in's intention
       raised).

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
    if held := _hold_back(email, clock()):
        return held
    claim = claim_take(
        Email.objects.filter(status=Status.QUEUED),
        mail_id=email_id,
        holder=claim_holder(worker),
        now=clock(),
        status=Status.DRAFTING if email.subject is None else Status.SENDING,
        # Made once and kept: every try of this email carries the same Message-ID.
        provider_message_id=email.provider_message_id or make_msgid(domain=urlsplit(settings.SITE_URL).hostname),
    )
    if claim is None:
        return SendOutcome.NOT_OURS
    with claim_kept_alive(claim):
        return _send_claimed(claim, clock=clock, retry_in=retry_in)


def _send_claimed(claim: Claim, *, clock: Callable[[], datetime], retry_in: float | None) -> SendOutcome:
    email = email_for_sending(email_id=claim.mail_id)
    assert email is not None, "a claimed email cannot vanish: erasing the account takes its rows in one transaction"
    if email.subject is None:
        drafted = _draft(email, claim, clock(), retry_in=retry_in)
        if isinstance(drafted, SendOutcome):
            return drafted
        email = drafted
    # The time after the draft, not before it: two model calls can take it into the
    # person's quiet hours, and then it waits for their next sending time, draft kept.
    if held := _hold_back(email, clock(), claim=claim):
        return held
    delivered = claimed_mail_deliver(_message(email), claim, clock=clock)
    return _recorded(email, claim, delivered, clock=clock, retry_in=retry_in)


def _recorded(
    email: Email, claim: Claim, delivered: Delivered, *, clock: Callable[[], datetime], retry_in: float | None
) -> SendOutcome:
    match delivered.outcome:
        case Outcome.SENT:
            email_record_sent(claim, now=clock())
            return SendOutcome.SENT
        case Outcome.ABANDONED:
            logger.warning("email %s was taken back from this worker before its end went out", email.pk)
            return SendOutcome.NOT_OURS
        case Outcome.UNCONFIRMED:
            email_record_unconfirmed(claim, now=clock(), reason=delivered.reason)
            return SendOutcome.UNCONFIRMED
        case Outcome.TEMPORARY:
            claim_release(claim, send_after=_retry_due(clock(), retry_in), error=delivered.reason)
            raise EmailTemporaryFailure(delivered.reason)
    logger.error("email %s could not be sent, and will not be: %s", email.pk, delivered.reason)
    _finish(email, Status.FAILED, delivered.reason, claim=claim)
    return SendOutcome.FAILED


def email_give_up(*, email_id: int, error: str) -> None:
    """The last retry failed too: record it failed, with the error, so it is not lost."""
    Email.objects.filter(pk=email_id, status=Status.QUEUED).update(
        status=Status.FAILED, error=f"gave up after {settings.EMAIL_SEND_MAX_RETRIES} retries: {error}"
    )


def _hold_back(email: Email, now: datetime, *, claim: Claim | None = None) -> SendOutcome | None:
    """Skip an email the person no longer wants; keep one back outside their hours (its
    claim, if it has one, given back with it)."""
    preference = email_preference_for_user(user=email.user)
    if reason := _unwanted_because(email, preference):
        _finish(email, Status.SKIPPED, reason, claim=claim)
        return SendOutcome.SKIPPED
    hours = preference.hours
    if may_email_at(now, hours, sending_window()):
        return None
    send_at = next_sending_time(now, hours, sending_window())
    if send_at is None:
        _finish(email, Status.SKIPPED, "their quiet hours cover the whole sending window", claim=claim)
        return SendOutcome.SKIPPED
    if claim is not None:
        claim_release(claim, send_after=send_at)
    else:
        Email.objects.filter(pk=email.pk, status=Status.QUEUED).update(send_after=send_at)
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


def _draft(email: Email, claim: Claim, now: datetime, *, retry_in: float | None) -> Email | SendOutcome:
    """The email with its draft saved, `sending` now, or what became of it instead."""
    try:
        written = draft_email(email=email, now=now)
    except LLMError as error:
        if error.retryable:
            claim_release(
                claim, send_after=_retry_due(now, retry_in), error=f"the model could not write it yet: {error}"
            )
            raise EmailTemporaryFailure(str(error)) from error
        _finish(email, Status.FAILED, f"the model could not write it: {error}", claim=claim)
        return SendOutcome.FAILED
    if isinstance(written, RepetitiveDraft):
        # Kept for the record (the admin can see what was not sent, and why).
        _finish(
            email,
            Status.SKIPPED,
            written.reason,
            claim=claim,
            subject=written.draft.subject,
            body_text=written.draft.body,
        )
        return SendOutcome.SKIPPED
    # Under the claim: a claim handed on while the model wrote (its worker taken for dead)
    # keeps no draft of this attempt's; the new holder writes its own.
    saved = claim_rows(claim).update(
        status=Status.SENDING,
        subject=written.subject,
        body_text=written.body_text,
        body_html=written.body_html,
        embedding=written.embedding.vector,
        embedding_model=written.embedding.model,
    )
    current = email_for_sending(email_id=email.pk) if saved else None
    return current if current is not None else SendOutcome.NOT_OURS


def _message(email: Email) -> UnfoldedEmail:
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
    return message


def _retry_due(now: datetime, retry_in: float | None) -> datetime:
    """When the dispatcher may hand out an email given back for a retry: a minute after the
    task's own retry was due. So the retry runs first, and an email whose retry was lost
    with its worker (a countdown is held by the worker, outside its prefetch) is sent all
    the same, minutes later rather than at the broker's redelivery."""
    wait = settings.EMAIL_RETRY_BACKOFF_SECONDS if retry_in is None else retry_in
    return now + timedelta(seconds=wait) + RETRY_GRACE


def _finish(email: Email, outcome: str, reason: str, *, claim: Claim | None = None, **fields: object) -> None:
    """The email ends `outcome` (failed, skipped) with `reason`: under its claim, or, not yet
    claimed, only while still queued."""
    if claim is not None:
        claim_end(claim, status=outcome, error=reason, claimed_at=None, claim_token=None, **fields)
    else:
        Email.objects.filter(pk=email.pk, status=Status.QUEUED).update(status=outcome, error=reason, **fields)
    if outcome == Status.FAILED:
        logger.warning("email %s failed: %s", email.pk, reason)
