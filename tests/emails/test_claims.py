"""A claim's holder beats while it works, and the sweep tells a dead holder from a slow one:
its process gone (on this host), its heartbeat silent, or, in the last resort, its claim
older than any send could last; never a holder that beats, however long it takes, nor a
silence the sweep could not measure (a database that was away)."""

from __future__ import annotations

import subprocess
import time
from datetime import timedelta
from socket import gethostname

import pytest
from django.db import connection
from django.db.models.functions import Now
from django.utils import timezone

import emails.claims
from accounts.models import User
from emails.claims import Claim, claim_body_going, claim_holder, claim_kept_alive, claim_take
from emails.ledger import emails_release_dead
from emails.models import Email
from tests.emails.factories import make_email
from tests.emails.workers import wait_until

pytestmark = pytest.mark.django_db


def claimed(user: User, *, period_key: str = "2026-W01", holder: str | None = None) -> tuple[Email, Claim]:
    email = make_email(user, period_key=period_key, subject="Your long run", body="Hi,\n\nHow did it go?")
    claim = claim_take(
        Email.objects.filter(status="queued"),
        mail_id=email.pk,
        holder=holder or claim_holder("mailer"),
        now=timezone.now(),
    )
    assert claim is not None
    return email, claim


def silent_for(email: Email, seconds: float) -> None:
    Email.objects.filter(pk=email.pk).update(heartbeat_at=Now() - timedelta(seconds=seconds))


def status_of(email: Email) -> str:
    return Email.objects.values_list("status", flat=True).get(pk=email.pk)


def a_pid_that_is_gone() -> int:
    ended = subprocess.Popen(["true"])
    ended.wait()
    return ended.pid


def test_a_holder_that_beats_keeps_its_claim_however_long_it_has_held_it(user: User, settings) -> None:
    email, _ = claimed(user)
    # Claimed long ago (a ten-minute wait for the end of the data, say), and beating.
    Email.objects.filter(pk=email.pk).update(claimed_at=timezone.now() - timedelta(minutes=40))
    silent_for(email, settings.EMAIL_CLAIM_SILENT_SECONDS / 2)

    released = emails_release_dead(now=timezone.now())

    assert (released.requeued, released.unconfirmed) == ([], [])
    assert status_of(email) == "sending"


def test_a_holder_silent_past_the_limit_is_taken_for_dead_and_its_email_queued_again(user: User, settings) -> None:
    email, _ = claimed(user)
    silent_for(email, settings.EMAIL_CLAIM_SILENT_SECONDS + 1)

    released = emails_release_dead(now=timezone.now())

    assert released.requeued == [email.pk]
    row = Email.objects.get(pk=email.pk)
    assert (row.status, row.claim_token, row.claimed_by, row.heartbeat_at) == ("queued", None, "", None)
    # Its draft is kept: the next sender sends it as it was written.
    assert row.subject == "Your long run"


def test_a_holder_whose_process_on_this_host_is_gone_is_taken_for_dead_at_once(user: User) -> None:
    email, _ = claimed(user, holder=f"mailer@host ({gethostname()}:{a_pid_that_is_gone()}:0123456789ab)")
    alive, _ = claimed(user, period_key="alive")

    released = emails_release_dead(now=timezone.now())

    assert released.requeued == [email.pk]
    assert status_of(alive) == "sending"


def test_a_holder_on_another_host_is_judged_by_its_heartbeat_alone(user: User) -> None:
    elsewhere, _ = claimed(user, holder=f"mailer@far ({gethostname()}-elsewhere:1:0123456789ab)")

    assert emails_release_dead(now=timezone.now()).requeued == []
    assert status_of(elsewhere) == "sending"


def test_a_silence_the_sweep_could_not_measure_counts_for_nothing(
    user: User, settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    silent, _ = claimed(user)
    silent_for(silent, settings.EMAIL_CLAIM_SILENT_SECONDS + 1)
    gone, _ = claimed(user, period_key="gone", holder=f"x ({gethostname()}:{a_pid_that_is_gone()}:0123456789ab)")
    # The sweep's own read of the claims was slow: the database was away, and held the
    # holders' beats up with it.
    monkeypatch.setattr(emails.claims, "SLOW_READ_SECONDS", -1.0)

    released = emails_release_dead(now=timezone.now())

    assert released.requeued == [gone.pk]
    assert status_of(silent) == "sending"


def test_the_last_resort_hands_on_a_claim_older_than_any_send_could_last(user: User, settings) -> None:
    email, _ = claimed(user)
    Email.objects.filter(pk=email.pk).update(
        claimed_at=timezone.now() - timedelta(seconds=settings.EMAIL_CLAIM_STALE_SECONDS + 1)
    )

    assert emails_release_dead(now=timezone.now()).requeued == [email.pk]


@pytest.mark.usefixtures("transactional_db")
def test_a_claim_kept_alive_beats_while_its_holder_waits_and_stops_once_handed_on(user: User, settings) -> None:
    settings.EMAIL_CLAIM_HEARTBEAT_SECONDS = 0.2
    email, claim = claimed(user)
    first = Email.objects.values_list("heartbeat_at", flat=True).get(pk=email.pk)

    with claim_kept_alive(claim):
        wait_until(
            lambda: Email.objects.values_list("heartbeat_at", flat=True).get(pk=email.pk) > first,
            "a heartbeat while the holder waits",
        )
        # Handed on meanwhile: the beats stop, and never touch the mail again.
        Email.objects.filter(pk=email.pk).update(status="queued", claim_token=None, heartbeat_at=None)
        time.sleep(settings.EMAIL_CLAIM_HEARTBEAT_SECONDS * 3)

    assert Email.objects.values_list("heartbeat_at", flat=True).get(pk=email.pk) is None
    connection.close()


def test_an_end_of_data_that_goes_while_the_sweep_judges_its_holder_is_never_queued_again(
    user: User, settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    email, claim = claimed(user)
    silent_for(email, settings.EMAIL_CLAIM_SILENT_SECONDS + 1)
    judged = emails.claims._is_dead
    went: list[bool] = []

    def meanwhile_the_holder_sends_its_end(*args: object, **kwargs: object) -> bool:
        # Alive after all: between the sweep's read and its hand-over, the end goes.
        went.append(claim_body_going(claim, now=timezone.now()))
        return judged(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(emails.claims, "_is_dead", meanwhile_the_holder_sends_its_end)
    released = emails_release_dead(now=timezone.now())

    assert went == [True]
    assert (released.requeued, released.unconfirmed) == ([], [])
    row = Email.objects.get(pk=email.pk)
    assert row.status == "sending" and row.body_sent_at is not None
