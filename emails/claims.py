"""An email's claim: who is sending it, how far they got, and what becomes of a claim
whose holder died.

A send task claims its email (one conditional UPDATE) in the name of its worker: the
Celery node's name and its process id, with a token of its own that every later step of
that attempt must match. Just before the end of its data goes to the SMTP server, the
claim records it (`body_sent_at`): from then on the email may be delivered, whatever
happens to the worker. A claim ends with its task (sent, sent-unconfirmed, failed,
released for a retry), or is released for a holder that died:

- at once, when a worker starts again under the same name (after a crash, SIGKILL, the
  machine's out-of-memory killer): before it runs any task, whatever its name held is
  its dead predecessor's;
- by the dispatcher, once older than EMAIL_CLAIM_STALE_SECONDS (a worker that never came
  back, or came back under another name).

Released, an email whose end of data had not gone is queued again, due at once; one whose
end had gone is recorded sent-unconfirmed and never sent again. Releasing a claim whose
holder is in fact alive sends nothing twice: that holder, finding its token gone when it
comes to record the end of data, stops without sending it.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from emails.models import Email
from memory.services import prospective_memory_raise

logger = logging.getLogger(__name__)

Status = Email.Status
UNCONFIRMED_AFTER_RESTART = (
    "the worker sending it died after the end of the message went to the server: "
    "it may have been delivered, so it is not sent again"
)


@dataclass(frozen=True)
class Claim:
    """One attempt's hold on one email."""

    email_id: int
    token: uuid.UUID
    holder: str


@dataclass(frozen=True)
class ReleasedClaims:
    requeued: int
    unconfirmed: int


def claim_holder(worker: str | None) -> str:
    """How a claim names who holds it: "celery@host (pid 4242)", the node's name first."""
    return f"{worker or socket.gethostname()} (pid {os.getpid()})"


def email_claim(*, email_id: int, holder: str, message_id: str, now: datetime) -> Claim | None:
    """Claim a drafted, queued email for sending; None when another task has it, or had it."""
    # The only way into `sending`: one conditional UPDATE, so of any number of tasks
    # racing for the row, exactly one sees a row updated.
    token = uuid.uuid4()
    claimed = Email.objects.filter(pk=email_id, status=Status.QUEUED, subject__isnull=False).update(
        status=Status.SENDING,
        claimed_at=now,
        claimed_by=holder,
        claim_token=token,
        body_sent_at=None,
        attempts=F("attempts") + 1,
        provider_message_id=message_id,
    )
    return Claim(email_id=email_id, token=token, holder=holder) if claimed else None


def claim_rows(claim: Claim) -> QuerySet[Email]:
    """The email, while this claim still holds it."""
    return Email.objects.filter(pk=claim.email_id, status=Status.SENDING, claim_token=claim.token)


def claim_body_going(claim: Claim, *, now: datetime) -> bool:
    """Record that the end of the email's data is about to go; False when the claim was
    released meanwhile (then it must not go: someone else may be sending it)."""
    return claim_rows(claim).filter(body_sent_at__isnull=True).update(body_sent_at=now) == 1


def claim_record_sent(claim: Claim, *, now: datetime) -> bool:
    """The server took the email (250 to its end of data). Recorded also over a release
    that had already made it sent-unconfirmed: the reply came after all."""
    with transaction.atomic():
        recorded = Email.objects.filter(
            pk=claim.email_id, claim_token=claim.token, status__in=[Status.SENDING, Status.SENT_UNCONFIRMED]
        ).update(status=Status.SENT, sent_at=now, error="")
        if recorded:
            _raise_check_ins([claim.email_id], now=now)
    if not recorded:
        logger.warning("email %s went out, but its claim had already ended", claim.email_id)
    return bool(recorded)


def claim_record_unconfirmed(claim: Claim, *, now: datetime, reason: str) -> None:
    """The whole email went to the server and no reply to its end came: it may have been
    delivered, so it is recorded as such and never sent again."""
    with transaction.atomic():
        recorded = claim_rows(claim).update(status=Status.SENT_UNCONFIRMED, sent_at=F("body_sent_at"), error=reason)
        if recorded:
            _raise_check_ins([claim.email_id], now=now)
    logger.warning("email %s may or may not have been delivered: %s", claim.email_id, reason)


def claim_release(claim: Claim, *, send_after: datetime, error: str) -> None:
    """Give the email back, queued, for a later try: nothing of it was delivered."""
    claim_rows(claim).update(
        status=Status.QUEUED,
        claimed_at=None,
        claimed_by="",
        claim_token=None,
        body_sent_at=None,
        error=error,
        send_after=send_after,
    )


def claims_release_for_node(*, node: str, now: datetime | None = None) -> ReleasedClaims:
    """A worker named `node` is starting, before it runs any task: every claim made under
    its name belongs to a predecessor that died."""
    rows = Email.objects.filter(status=Status.SENDING, claimed_by__startswith=f"{node} (pid ")
    return _release_dead(rows, now=now or timezone.now())


def claims_release_stale(*, now: datetime) -> ReleasedClaims:
    """Claims older than EMAIL_CLAIM_STALE_SECONDS: their holder would have finished long
    since (the limit is above the longest SMTP exchange RFC 5321 allows), so it died."""
    stale = now - timedelta(seconds=settings.EMAIL_CLAIM_STALE_SECONDS)
    return _release_dead(Email.objects.filter(status=Status.SENDING, claimed_at__lt=stale), now=now)


def _release_dead(rows: QuerySet[Email], *, now: datetime) -> ReleasedClaims:
    with transaction.atomic():
        requeued = rows.filter(body_sent_at__isnull=True).update(
            status=Status.QUEUED, claimed_at=None, claimed_by="", claim_token=None, send_after=now
        )
        # Locked, so a reply that comes in now (recording the email sent) waits for this.
        went = list(rows.filter(body_sent_at__isnull=False).select_for_update().values_list("pk", flat=True))
        unconfirmed = Email.objects.filter(pk__in=went).update(
            status=Status.SENT_UNCONFIRMED, sent_at=F("body_sent_at"), error=UNCONFIRMED_AFTER_RESTART
        )
        _raise_check_ins(went, now=now)
    if requeued or unconfirmed:
        logger.warning("released the claims of a dead worker: %s queued again, %s unconfirmed", requeued, unconfirmed)
    return ReleasedClaims(requeued=requeued, unconfirmed=unconfirmed)


def _raise_check_ins(email_ids: list[int], *, now: datetime) -> None:
    # A check-in that went out (or may have) has asked about its intention.
    check_ins = Email.objects.filter(pk__in=email_ids, kind=Email.Kind.CHECK_IN, memory__isnull=False)
    for email in check_ins.select_related("user"):
        assert email.memory_id is not None  # the query asked for those with one
        prospective_memory_raise(
            user=email.user, memory_id=email.memory_id, reason="asked about it in a check-in email", now=now
        )
