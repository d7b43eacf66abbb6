"""A claim on one piece of mail (a follow-up email, or account mail someone waits for):
who holds it, that they are alive, how far they got, and what becomes of it when they die.

A sender claims its mail with one conditional UPDATE, in the name of its process (the
Celery node's name, then the host, pid and start of the process: coach/liveness.py), with
a token of its own that every later step of that attempt must match. From then until its
claim ends, a thread of the holder's beats (`heartbeat_at`, by the database's clock) every
EMAIL_CLAIM_HEARTBEAT_SECONDS, whatever the sender waits on: the model drafting, an SMTP
reply. Just before the end of the data goes to the SMTP server, the claim records it
(`body_sent_at`): from then on the mail may be delivered, whatever happens to the sender.

A claim ends with its sender (sent, sent-unconfirmed, failed, skipped, given back for a
retry), or is handed on by the sweep (claims_release_dead) when its holder died:

- at once, when its process is known gone (it ran on this host, and its pid is no more:
  a worker killed whole, or the one pool process the out-of-memory killer chose);
- when its heartbeat stopped for EMAIL_CLAIM_SILENT_SECONDS (a holder on another host, or
  frozen), unless the sweep's own read of the claims was slow (the database was away:
  the holders' beats were held up with it, and their silence says nothing yet);
- in the last resort, once older than EMAIL_CLAIM_STALE_SECONDS, longer than any drafting
  and SMTP exchange the settings allow (a holder beating but stuck for good).

Handed on, mail whose end of data had not gone is queued again, due at once; mail whose
end had gone is recorded sent-unconfirmed and never sent again. Handing on a claim whose
holder is in fact alive sends nothing twice: that holder, finding its token gone when it
comes to record the end of data, stops without sending it, and a draft it saves after is
refused.
"""

from __future__ import annotations

import contextlib
import logging
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import DateTimeField, DurationField, ExpressionWrapper, F, QuerySet
from django.db.models.functions import Coalesce, Now

from coach.liveness import known_dead, this_process
from emails.models import Email, OutgoingMail
from infra.dbsteps import release_connection

logger = logging.getLogger(__name__)

Status = Email.Status
# A claim holds its mail in these; account mail is never drafted.
HOLDING = (Status.DRAFTING, Status.SENDING)
UNCONFIRMED_AFTER_DEATH = (
    "the sender died after the end of the message went to the server: "
    "it may have been delivered, so it is not sent again"
)
# A claim's columns once no one holds it.
UNCLAIMED: Mapping[str, Any] = {
    "claimed_at": None,
    "claimed_by": "",
    "claim_token": None,
    "heartbeat_at": None,
    "body_sent_at": None,
}
# A read of the claims that took this long met a database that was away.
SLOW_READ_SECONDS = 1.0
_PROCESS_IN_HOLDER = re.compile(r"\(([^()]*)\)$")


@dataclass(frozen=True)
class Claim:
    """One attempt's hold on one piece of mail."""

    model: type[Email] | type[OutgoingMail]
    mail_id: int
    token: uuid.UUID
    holder: str


@dataclass(frozen=True)
class ReleasedClaims:
    requeued: list[int]
    unconfirmed: list[int]


def claim_holder(worker: str | None) -> str:
    """How a claim names who holds it: "celery@host (host:4242:1f3a...)", the Celery
    node's name first, then the process (coach/liveness.py), which the sweep reads."""
    return f"{worker or socket.gethostname()} ({this_process()})"


def claim_take(
    rows: QuerySet[Any], *, mail_id: int, holder: str, now: datetime, status: str = Status.SENDING, **fields: Any
) -> Claim | None:
    """Claim the mail `mail_id` if `rows` still hold it as they say (queued, and whatever
    else they ask), setting `fields` too: one conditional UPDATE, so of any number of
    senders racing for it, exactly one sees a row updated. None for the others."""
    token = uuid.uuid4()
    claimed = rows.filter(pk=mail_id).update(
        status=status,
        claimed_at=now,
        claimed_by=holder,
        claim_token=token,
        heartbeat_at=Now(),
        body_sent_at=None,
        attempts=F("attempts") + 1,
        **fields,
    )
    return Claim(model=rows.model, mail_id=mail_id, token=token, holder=holder) if claimed else None


def claim_rows(claim: Claim) -> QuerySet[Any]:
    """The mail, while this claim still holds it."""
    return claim.model.objects.filter(pk=claim.mail_id, status__in=HOLDING, claim_token=claim.token)


def claim_heartbeat(claim: Claim) -> bool | None:
    """The holder is alive: recorded, by the database's clock, if it still holds the claim.
    True when recorded; False when the claim no longer holds; None when the row was busy
    (a step of this very claim, or the sweep, has it locked): a beat is never worth waiting
    on a lock for, and the next one comes soon."""
    with transaction.atomic():
        free = claim_rows(claim).select_for_update(skip_locked=True).values_list("pk", flat=True)
        if claim_rows(claim).filter(pk__in=list(free)).update(heartbeat_at=Now()):
            return True
    return None if claim_rows(claim).exists() else False


@contextlib.contextmanager
def claim_kept_alive(claim: Claim) -> Iterator[None]:
    """Beat for `claim` every EMAIL_CLAIM_HEARTBEAT_SECONDS, from a thread of its own, until
    the block ends (or the claim is found ended): the sender may wait minutes on the model
    or on an SMTP reply meanwhile, and is still known alive."""
    done = threading.Event()
    beating = threading.Thread(target=_beat, args=(claim, done), name=f"claim-{claim.mail_id}", daemon=True)
    beating.start()
    try:
        yield
    finally:
        done.set()
        # A beat stuck on a database that went away is not waited for: it ends on its own.
        beating.join(timeout=settings.EMAIL_CLAIM_HEARTBEAT_SECONDS)


def _beat(claim: Claim, done: threading.Event) -> None:
    while not done.wait(settings.EMAIL_CLAIM_HEARTBEAT_SECONDS):
        try:
            held = claim_heartbeat(claim)
        except Exception as error:
            # Missed: the sweep allows for a database away, and the next beat may land.
            logger.warning("mail %s: a heartbeat of its claim was missed (%s)", claim.mail_id, error)
            continue
        finally:
            # A connection of this thread's own, back to the pool between beats.
            release_connection()
        if held is False:
            # Ended by its sender, or handed on: either way, nothing left to beat for.
            return


def claim_body_going(claim: Claim, *, now: datetime) -> bool:
    """Record that the end of the mail's data is about to go; False when the claim was
    handed on meanwhile (then it must not go: someone else may be sending it)."""
    return claim_rows(claim).filter(body_sent_at__isnull=True).update(body_sent_at=now) == 1


def claim_end(claim: Claim, *, status: str, **fields: Any) -> bool:
    """End the claim with the mail in `status` (sent, failed, skipped, or queued again),
    with `fields`. Whether the claim still held it: a claim handed on ends nothing."""
    return claim_rows(claim).update(status=status, **fields) == 1


def claim_release(claim: Claim, *, send_after: datetime, **fields: Any) -> bool:
    """Give the mail back, queued, due at `send_after` (with `fields`: why, say): nothing
    of it was delivered."""
    return claim_end(claim, status=Status.QUEUED, send_after=send_after, **UNCLAIMED, **fields)


@dataclass(frozen=True)
class _Held:
    pk: int
    token: uuid.UUID | None
    claimed_by: str
    claimed_at: datetime | None
    heartbeat_at: datetime | None
    body_went: bool
    # How long since its last heartbeat (or its claim), by the database's clock.
    silent: timedelta | None


def claims_release_dead(
    model: type[Email] | type[OutgoingMail],
    *,
    now: datetime,
    unconfirmed: Mapping[str, Any],
    went_out: Callable[[list[int], datetime], None] | None = None,
) -> ReleasedClaims:
    """Hand on every claim on `model`'s mail whose holder died (see the module's docstring):
    queued again, due now, if the end of its data had not gone; else sent-unconfirmed,
    with `unconfirmed`'s fields, and `went_out` told which. Each row only if nothing moved
    since it was read: a holder that beat meanwhile keeps its claim."""
    rows = model.objects.filter(status__in=HOLDING).annotate(
        silent=ExpressionWrapper(
            Now() - Coalesce("heartbeat_at", "claimed_at", output_field=DateTimeField()), output_field=DurationField()
        )
    )
    read_from = time.monotonic()
    held = [
        _Held(pk, token, by, at, beat, sent is not None, silent)
        for pk, token, by, at, beat, sent, silent in rows.values_list(
            "pk", "claim_token", "claimed_by", "claimed_at", "heartbeat_at", "body_sent_at", "silent"
        )
    ]
    judge_silence = time.monotonic() - read_from <= SLOW_READ_SECONDS
    dead = [claim for claim in held if _is_dead(claim, now=now, judge_silence=judge_silence)]
    requeued, went = [], []
    for claim in dead:
        # As read, the end of its data included: one that went since (its holder alive after
        # all) must never be queued again, so the UPDATE says which it expects.
        still = model.objects.filter(
            pk=claim.pk,
            status__in=HOLDING,
            claim_token=claim.token,
            heartbeat_at=claim.heartbeat_at,
            body_sent_at__isnull=not claim.body_went,
        )
        if claim.body_went:
            with transaction.atomic():
                if still.update(status=Status.SENT_UNCONFIRMED, **unconfirmed):
                    went.append(claim.pk)
                    if went_out is not None:
                        went_out([claim.pk], now)
        elif still.update(status=Status.QUEUED, send_after=now, **UNCLAIMED):
            requeued.append(claim.pk)
    if requeued or went:
        logger.warning(
            "%s claims of dead senders handed on: %s queued again, %s unconfirmed",
            model.__name__,
            len(requeued),
            len(went),
        )
    return ReleasedClaims(requeued=requeued, unconfirmed=went)


def _is_dead(claim: _Held, *, now: datetime, judge_silence: bool) -> bool:
    if claim.claimed_at is None or claim.claimed_at < now - timedelta(seconds=settings.EMAIL_CLAIM_STALE_SECONDS):
        return True
    silent = timedelta(seconds=settings.EMAIL_CLAIM_SILENT_SECONDS)
    if judge_silence and claim.silent is not None and claim.silent > silent:
        return True
    process = _PROCESS_IN_HOLDER.search(claim.claimed_by)
    return process is not None and known_dead(process.group(1))
