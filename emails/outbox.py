"""Mail someone is waiting for, sent from a queue in the database.

A page that sends mail (sign-up, password reset, a sign-in code) only queues it, in its own
transaction; a task sends what is due every few seconds. So an SMTP server that is down
or slow never fails or holds up the page, and the mail goes out once it is back: a
temporary failure is tried again after a growing pause, for up to OUTBOX_GIVE_UP_AFTER.
A sender takes each mail with a lease; one that dies mid-send leaves it to the next.
"""

from __future__ import annotations

import logging
import smtplib
from datetime import datetime, timedelta

from django.core.mail import EmailMessage, EmailMultiAlternatives
from django.db import transaction
from django.utils import timezone

from emails.message import UnfoldedEmail
from emails.models import OutgoingMail
from emails.sending import MAILER, describe_smtp_failure, is_temporary_smtp_failure
from infra.encryption import lookup_digest

logger = logging.getLogger(__name__)

# A sender's hold on the mail it took; past it another sender may take the mail.
LEASE = timedelta(minutes=2)
# Pauses after each failed try: half a minute, doubling, to at most half an hour.
FIRST_PAUSE, LONGEST_PAUSE = timedelta(seconds=30), timedelta(minutes=30)
OUTBOX_GIVE_UP_AFTER = timedelta(days=2)
BATCH = 50


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
            created_at=now or timezone.now(),
            next_attempt_at=now or timezone.now(),
        )
        for address in message.to
    ]


def mail_send_due(*, now: datetime | None = None) -> int:
    """Send the queued mail whose time has come. Returns how many were sent."""
    now = now or timezone.now()
    sent = 0
    for mail in _take_due(now):
        sent += _send(mail, now=now)
    return sent


def mail_forget(address: str) -> int:
    """Erase the mail queued for `address` (its owner is being erased)."""
    deleted, _ = OutgoingMail.objects.filter(to_digest=mail_digest(address)).delete()
    return deleted


def mail_digest(address: str) -> str:
    return lookup_digest(f"outgoing-mail:{address.strip().lower()}")


def _take_due(now: datetime) -> list[OutgoingMail]:
    with transaction.atomic():
        due = list(
            OutgoingMail.objects.select_for_update(skip_locked=True)
            .filter(status=OutgoingMail.Status.QUEUED, next_attempt_at__lte=now)
            .order_by("next_attempt_at")[:BATCH]
        )
        OutgoingMail.objects.filter(pk__in=[mail.pk for mail in due]).update(next_attempt_at=now + LEASE)
    return due


def _send(mail: OutgoingMail, *, now: datetime) -> int:
    message = UnfoldedEmail(subject=mail.subject, body=mail.body_text, from_email=mail.from_email, to=[mail.to])
    if mail.body_html:
        message.attach_alternative(mail.body_html, "text/html")
    try:
        # No transaction or connection is held here: the take above committed.
        message.send(using=MAILER)
    except (smtplib.SMTPException, OSError) as error:
        _failed(mail, error, now=now)
        return 0
    OutgoingMail.objects.filter(pk=mail.pk).delete()
    return 1


def _failed(mail: OutgoingMail, error: Exception, *, now: datetime) -> None:
    attempts = mail.attempts + 1
    reason = describe_smtp_failure(error)
    if not is_temporary_smtp_failure(error) or now - mail.created_at >= OUTBOX_GIVE_UP_AFTER:
        logger.error("mail %s to a person could not be sent, and will not be: %s", mail.pk, reason)
        # What it said (a sign-in link, say) goes; the record of the failure stays.
        OutgoingMail.objects.filter(pk=mail.pk).update(
            status=OutgoingMail.Status.FAILED, attempts=attempts, error=reason, subject="", body_text="", body_html=""
        )
        return
    pause = min(FIRST_PAUSE * 2 ** (attempts - 1), LONGEST_PAUSE)
    logger.warning("mail %s could not be sent (%s); trying again in %s", mail.pk, reason, pause)
    OutgoingMail.objects.filter(pk=mail.pk).update(attempts=attempts, error=reason, next_attempt_at=now + pause)
