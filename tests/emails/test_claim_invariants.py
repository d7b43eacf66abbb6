"""The sending rule's promises, whatever order its steps come in, for the follow-up emails
and the account mail alike.

A hypothesis state machine plays the senders of one piece of mail: claims by any number of
senders, heartbeats, the end of the data going to the server, the server accepting it,
refusing it for now, or never answering, failures before the end, senders dying (their
heartbeat stopped, or their process gone), and the sweep that hands their claims on.
After every step: once an end of the message went and the server did not refuse it, no
other end goes, and the mail is never queued again; it is delivered at most once; a step
of a claim that no longer holds the mail changes nothing.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import timedelta
from socket import gethostname
from typing import Any, ClassVar

import pytest
from django.core.mail import EmailMessage
from django.db.models.functions import Now
from django.utils import timezone
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from emails.claims import (
    Claim,
    claim_body_going,
    claim_end,
    claim_heartbeat,
    claim_release,
    claim_take,
    claims_release_dead,
)
from emails.ledger import email_record_sent, email_record_unconfirmed, emails_release_dead
from emails.models import Email, OutgoingMail
from emails.outbox import TEXT_ERASED, mail_queue
from tests.conftest import make_user
from tests.emails.factories import make_email

pytestmark = pytest.mark.django_db

PEOPLE = itertools.count()
STEPS = [0]
HOLDING = ("drafting", "sending")


@dataclass
class Sender:
    claim: Claim
    # Its end of data is at the server, and the server has not said what became of it.
    end_at_server: bool = False
    said: list[str] = field(default_factory=list)


class Senders(RuleBasedStateMachine):
    model: ClassVar[type[Email] | type[OutgoingMail]]

    @initialize()
    def a_mail_is_queued(self) -> None:
        self.mail_id = self.queued()
        self.senders: list[Sender] = []
        # Ends of the message that went, and that the server did not refuse: delivered, or
        # perhaps (no answer came, or has not yet).
        self.ends_kept = 0
        self.delivered = 0

    # What differs between the two kinds of mail ----------------------------------------------

    def queued(self) -> int:
        raise NotImplementedError

    def record_sent(self, claim: Claim) -> bool:
        raise NotImplementedError

    def record_unconfirmed(self, claim: Claim) -> None:
        raise NotImplementedError

    def sweep(self) -> None:
        raise NotImplementedError

    # The senders' steps ----------------------------------------------------------------------

    @rule()
    def a_sender_claims_it(self) -> None:
        queued = self._status() == "queued"
        claim = claim_take(
            self.model.objects.filter(status="queued"),
            mail_id=self.mail_id,
            holder="a sender (nowhere:1:x)",
            now=timezone.now(),
        )
        assert (claim is not None) == queued
        if claim is not None:
            self.senders.append(Sender(claim))
        STEPS[0] += 1

    @precondition(lambda self: self.senders)
    @rule(which=st.integers(min_value=0))
    def a_sender_beats(self, which: int) -> None:
        sender, holds, before = self._pick(which)
        assert claim_heartbeat(sender.claim) is holds
        if not holds:
            assert self._row() == before

    @precondition(lambda self: self.senders)
    @rule(which=st.integers(min_value=0))
    def a_senders_end_of_data_is_about_to_go(self, which: int) -> None:
        sender, holds, before = self._pick(which)
        going = claim_body_going(sender.claim, now=timezone.now())
        assert going == (holds and before["body_sent_at"] is None)
        if going:
            sender.end_at_server = True
            self.ends_kept += 1
        else:
            assert self._row() == before

    @precondition(lambda self: any(sender.end_at_server for sender in self.senders))
    @rule(which=st.integers(min_value=0))
    def the_server_accepts_an_end(self, which: int) -> None:
        sender = self._at_server(which)
        sender.end_at_server = False
        self.delivered += 1
        self.record_sent(sender.claim)

    @precondition(lambda self: any(sender.end_at_server for sender in self.senders))
    @rule(which=st.integers(min_value=0))
    def the_server_refuses_an_end_for_now(self, which: int) -> None:
        sender = self._at_server(which)
        sender.end_at_server = False
        if claim_release(sender.claim, send_after=timezone.now(), error="451 try again later"):
            # Refused, and said so: this end was never delivered.
            self.ends_kept -= 1

    @precondition(lambda self: any(sender.end_at_server for sender in self.senders))
    @rule(which=st.integers(min_value=0))
    def the_server_never_answers_an_end(self, which: int) -> None:
        sender = self._at_server(which)
        sender.end_at_server = False
        self.record_unconfirmed(sender.claim)

    @precondition(lambda self: self.senders)
    @rule(which=st.integers(min_value=0))
    def a_sender_fails_before_its_end(self, which: int) -> None:
        sender, holds, before = self._pick(which)
        if sender.end_at_server:
            return
        assert claim_release(sender.claim, send_after=timezone.now(), error="refused for now") == holds
        if not holds:
            assert self._row() == before

    @rule()
    def the_holder_goes_silent(self) -> None:
        self.model.objects.filter(pk=self.mail_id).update(heartbeat_at=Now() - timedelta(seconds=60))

    @rule()
    def the_holders_process_is_gone(self) -> None:
        # A process of this host that is no more: no pid is that high.
        self.model.objects.filter(pk=self.mail_id).update(claimed_by=f"a sender ({gethostname()}:999999999:x)")

    @rule()
    def the_sweep_runs(self) -> None:
        self.sweep()
        STEPS[0] += 1

    # What always holds -----------------------------------------------------------------------

    @invariant()
    def delivered_at_most_once_and_never_queued_again_once_its_end_was_kept(self) -> None:
        if not hasattr(self, "mail_id"):
            return
        assert self.ends_kept <= 1
        assert self.delivered <= 1
        if self.ends_kept:
            assert self._status() not in ("queued", "drafting")

    # Reading the mail ------------------------------------------------------------------------

    def _pick(self, which: int) -> tuple[Sender, bool, dict[str, Any]]:
        sender = self.senders[which % len(self.senders)]
        row = self._row()
        STEPS[0] += 1
        holds = row is not None and row["status"] in HOLDING and row["claim_token"] == sender.claim.token
        return sender, holds, row

    def _at_server(self, which: int) -> Sender:
        waiting = [sender for sender in self.senders if sender.end_at_server]
        STEPS[0] += 1
        return waiting[which % len(waiting)]

    def _row(self) -> dict[str, Any] | None:
        return (
            self.model.objects.filter(pk=self.mail_id)
            .values("status", "claim_token", "body_sent_at", "claimed_by", "heartbeat_at", "send_after")
            .first()
        )

    def _status(self) -> str | None:
        row = self._row()
        return None if row is None else row["status"]


class FollowUpSenders(Senders):
    model = Email

    def queued(self) -> int:
        person = make_user(f"follow-up-{next(PEOPLE)}@example.com")
        return make_email(person, subject="Your long run", body="Hi,\n\nHow did it go?").pk

    def record_sent(self, claim: Claim) -> bool:
        return email_record_sent(claim, now=timezone.now())

    def record_unconfirmed(self, claim: Claim) -> None:
        email_record_unconfirmed(claim, now=timezone.now(), reason="no reply to the end")

    def sweep(self) -> None:
        emails_release_dead(now=timezone.now())


class AccountMailSenders(Senders):
    model = OutgoingMail

    def queued(self) -> int:
        [mail] = mail_queue(EmailMessage("Reset your password", "A link", "coach@example.com", ["ada@example.com"]))
        return mail.pk

    def record_sent(self, claim: Claim) -> bool:
        # As the outbox does: the mail is no more once sent.
        return OutgoingMail.objects.filter(pk=claim.mail_id, claim_token=claim.token).delete()[0] == 1

    def record_unconfirmed(self, claim: Claim) -> None:
        claim_end(claim, status="sent_unconfirmed", error="no reply to the end", **TEXT_ERASED)

    def sweep(self) -> None:
        claims_release_dead(OutgoingMail, now=timezone.now(), unconfirmed={"error": "its sender died", **TEXT_ERASED})

    def _status(self) -> str | None:
        # Sent, it is gone: as good as sent for the invariant.
        status = super()._status()
        return "sent" if status is None else status


MACHINE_SETTINGS = settings(
    max_examples=50, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@pytest.mark.parametrize("machine", [FollowUpSenders, AccountMailSenders], ids=["follow-up", "account mail"])
def test_a_mail_is_delivered_at_most_once_whatever_its_senders_and_the_sweep_do(machine: type[Senders]) -> None:
    STEPS[0] = 0
    run_state_machine_as_test(machine, settings=MACHINE_SETTINGS)
    assert STEPS[0] >= 300, STEPS[0]
