"""Mail someone is waiting for, sent from a queue in the database, each one once.

A page that sends mail (sign-up, password reset, a sign-in code) only queues it, in its own
transaction; a task sends what is due every few seconds. So an SMTP server that is down
or slow never fails or holds up the page, and the mail goes out once it is back: a
temporary failure is tried again after a growing pause, for up to OUTBOX_GIVE_UP_AFTER.

It is sent by the rule every mail of the app follows (emails/claims.py, emails/delivery.py):
a sender claims one mail at a time and beats while it sends; a failure before the end of
the message is temporary or permanent by what the server said; once the end went, the
sender waits for the reply as RFC 5321 says (ten minutes), and a reply that never comes
leaves the mail sent-unconfirmed, never sent again; a sender that dies holding a claim is
found out in seconds and its mail handed on (queued again, or unconfirmed if its end had
gone). Every try carries the Message-ID the mail was queued with. Each mail queued is
sent: a person who asks for a second reset gets a second one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.core.mail import EmailMessage, EmailMultiAlternatives, make_msgid
from django.db import transaction
from django.utils import timezone

from emails.claims import (
    UNCONFIRMED_AFTER_DEATH,
    Claim,
    claim_end,
    claim_holder,
    claim_kept_alive,
    claim_release,
    claim_rows,
    claim_take,
    claims_release_dead,
)
from emails.delivery import Delivered, Outcome, claimed_mail_deliver
from emails.message import UnfoldedEmail
from emails.models import OutgoingMail
from infra.encryption import lookup_digest

logger = logging.getLogger(__name__)

# Pauses after each failed try: half a minute, doubling, to at most half an hour.
FIRST_PAUSE, LONGEST_PAUSE = timedelta(seconds=30), timedelta(minutes=30)
OUTBOX_GIVE_UP_AFTER = timedelta(days=2)
# The most mail one tick sends; the rest waits five seconds for the next.
BATCH = 50
Status = OutgoingMail.Status
# What it said (a sign-in link, say) goes once it cannot be sent again; the record stays.
TEXT_ERASED = {"subject": "", "body_text": "", "body_html": ""}


def mail_queue(message: EmailMessage, *, now: datetime | None = None) -> list[OutgoingMail]:
    """Queue `message` for each of its recipients; it goes out within seconds."""
    html = ""
    if isinstance(message, EmailMultiAlternatives):
        html = next(
            (
                content
                for content, mimetype in message.alternatives
                if mimetype == "text/html" and isinstance(content, str)
            ),
            "",
        )
    return [
        OutgoingMail.objects.create(
            to=address,
            to_digest=mail_digest(address),
            from_email=message.from_email,
            subject=str(message.subject),
            body_text=str(message.body),
            body_html=str(html),
            message_id=_message_id(),
            created_at=now or timezone.now(),
            send_after=now or timezone.now(),
        )
        for address in message.to
    ]


def mail_send_due(*, now: datetime | None = None, worker: str | None = None) -> int:
    """Send the queued mail whose time has come, one claim at a time, in the name of
    `worker` (the Celery node). What dead senders held is handed on first. Returns how
    many were sent."""
    clock: Callable[[], datetime] = (lambda: now) if now is not None else timezone.now
    claims_release_dead(OutgoingMail, now=clock(), unconfirmed={"error": UNCONFIRMED_AFTER_DEATH, **TEXT_ERASED})
    sent = 0
    holder = claim_holder(worker)
    for _ in range(BATCH):
        claim = _next_due_claimed(holder, clock())
        if claim is None:
            break
        with claim_kept_alive(claim):
            sent += _sent(claim, clock=clock)
    return sent


def mail_forget(address: str) -> int:
    """Erase the mail queued for `address` (its owner is being erased)."""
    deleted, _ = OutgoingMail.objects.filter(to_digest=mail_digest(address)).delete()
    return deleted


def mail_digest(address: str) -> str:
    return lookup_digest(f"outgoing-mail:{address.strip().lower()}")


def _message_id() -> str:
    return make_msgid(domain=urlsplit(settings.SITE_URL).hostname)


def _next_due_claimed(holder: str, now: datetime) -> Claim | None:
    """The queued mail due soonest, claimed; None when there is none. Mail another sender
    is taking at this moment is skipped, not waited for."""
    with transaction.atomic():
        due = (
            OutgoingMail.objects.select_for_update(skip_locked=True)
            .filter(status=Status.QUEUED, send_after__lte=now)
            .order_by("send_after")
            .values_list("pk", "message_id")
            .first()
        )
        if due is None:
            return None
        mail_id, message_id = due
        return claim_take(
            OutgoingMail.objects.filter(status=Status.QUEUED),
            mail_id=mail_id,
            holder=holder,
            now=now,
            # Mail queued before Message-IDs were kept gets one now, for every try after.
            message_id=message_id or _message_id(),
        )


def _sent(claim: Claim, *, clock: Callable[[], datetime]) -> int:
    mail = claim_rows(claim).first()
    if mail is None:
        return 0
    message = UnfoldedEmail(
        subject=mail.subject,
        body=mail.body_text,
        from_email=mail.from_email,
        to=[mail.to],
        headers={"Message-ID": mail.message_id},
    )
    if mail.body_html:
        message.attach_alternative(mail.body_html, "text/html")
    delivered = claimed_mail_deliver(message, claim, clock=clock)
    if delivered.outcome == Outcome.SENT:
        # It holds links that sign a person in: nothing of it is kept once it went.
        OutgoingMail.objects.filter(pk=mail.pk, claim_token=claim.token).delete()
        return 1
    _not_sent(mail, claim, delivered, now=clock())
    return 0


def _not_sent(mail: OutgoingMail, claim: Claim, delivered: Delivered, *, now: datetime) -> None:
    match delivered.outcome:
        case Outcome.ABANDONED:
            logger.warning("mail %s was taken back from this sender before its end went out", mail.pk)
        case Outcome.UNCONFIRMED:
            logger.warning("mail %s may or may not have been delivered: %s", mail.pk, delivered.reason)
            claim_end(claim, status=Status.SENT_UNCONFIRMED, error=delivered.reason, **TEXT_ERASED)
        case Outcome.TEMPORARY if now - mail.created_at < OUTBOX_GIVE_UP_AFTER:
            pause = min(FIRST_PAUSE * 2 ** (mail.attempts - 1), LONGEST_PAUSE)
            logger.warning("mail %s could not be sent (%s); trying again in %s", mail.pk, delivered.reason, pause)
            claim_release(claim, send_after=now + pause, error=delivered.reason)
        case _:
            logger.error("mail %s to a person could not be sent, and will not be: %s", mail.pk, delivered.reason)
            claim_end(claim, status=Status.FAILED, error=delivered.reason, claimed_at=None, **TEXT_ERASED)
