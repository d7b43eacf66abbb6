"""What the ledger records of a follow-up email as its claim ends (emails/claims.py): sent,
sent-unconfirmed, or handed on by the sweep because its sender died. A check-in that went
out (or may have) has asked about its intention, which is marked raised with it."""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction
from django.db.models import F

from emails.claims import UNCONFIRMED_AFTER_DEATH, Claim, ReleasedClaims, claim_end, claims_release_dead
from emails.models import Email
from memory.services import prospective_memory_raise

logger = logging.getLogger(__name__)

Status = Email.Status


def email_record_sent(claim: Claim, *, now: datetime) -> bool:
    """The server took the email (250 to its end of data). Recorded also over a sweep that
    had already made it sent-unconfirmed: the reply came after all."""
    with transaction.atomic():
        recorded = Email.objects.filter(
            pk=claim.mail_id, claim_token=claim.token, status__in=[Status.SENDING, Status.SENT_UNCONFIRMED]
        ).update(status=Status.SENT, sent_at=now, error="")
        if recorded:
            check_ins_raise([claim.mail_id], now)
    if not recorded:
        logger.warning("email %s went out, but its claim had already ended", claim.mail_id)
    return bool(recorded)


def email_record_unconfirmed(claim: Claim, *, now: datetime, reason: str) -> None:
    """The whole email went to the server and no reply to its end came: it may have been
    delivered, so it is recorded as such and never sent again."""
    with transaction.atomic():
        if claim_end(claim, status=Status.SENT_UNCONFIRMED, sent_at=F("body_sent_at"), error=reason):
            check_ins_raise([claim.mail_id], now)
    logger.warning("email %s may or may not have been delivered: %s", claim.mail_id, reason)


def emails_release_dead(*, now: datetime) -> ReleasedClaims:
    """The sweep, over the follow-up emails: every claim whose sender died handed on."""
    return claims_release_dead(
        Email,
        now=now,
        unconfirmed={"sent_at": F("body_sent_at"), "error": UNCONFIRMED_AFTER_DEATH},
        went_out=check_ins_raise,
    )


def check_ins_raise(email_ids: list[int], now: datetime) -> None:
    """A check-in that went out (or may have) has asked about its intention."""
    check_ins = Email.objects.filter(pk__in=email_ids, kind=Email.Kind.CHECK_IN, memory__isnull=False)
    for email in check_ins.select_related("user"):
        assert email.memory_id is not None  # the query asked for those with one
        prospective_memory_raise(
            user=email.user, memory_id=email.memory_id, reason="asked about it in a check-in email", now=now
        )
