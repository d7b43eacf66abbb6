"""A worker killed in the middle of sending (SIGKILL: no warm shutdown, no goodbye), then
started again under its name, as the run command's supervisor or a container's restart
policy does:

- killed before the end of the email went to the server, the restart releases its claim
  before taking any task and hands the email out again: it goes out within two minutes;
- killed while it waited for the reply to the end, the email may have been delivered: it
  is recorded sent-unconfirmed, and never sent again;
- the emails queued behind the one it was sending were never fetched by it (a prefetch of
  one), so they go out after the restart too, not at the broker's redelivery.

The workers are processes of their own (`celery -A coach worker`); the SMTP server holds
the exchange where the kill is to land. Redis's visibility timeout is an hour and no beat
runs the dispatcher: neither can be what sends the emails here.
"""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import User
from coach.celery import app
from emails.models import Email
from emails.planning import emails_dispatch_due, lease_from
from emails.tasks import send_email
from offline_coach import ModelServer
from tests.conftest import make_user
from tests.emails.factories import make_email, reachable_now
from tests.emails.scripted_smtp import Script, ScriptedSmtpServer
from tests.emails.workers import forget_unacknowledged, tasks_waiting_in_redis, wait_until, worker_process

pytestmark = pytest.mark.usefixtures("transactional_db")

RESTARTED_WITHIN_SECONDS = 120.0
WORKER = "mailer"


@pytest.fixture
def server() -> Iterator[ScriptedSmtpServer]:
    app.control.purge()
    started = ScriptedSmtpServer().start()
    yield started
    started.stop()
    forget_unacknowledged()


def planned_and_handed_out(person: User) -> Email:
    """An email as planning leaves it once its task is queued: leased, so the dispatcher
    leaves it to that task for a visibility timeout."""
    reachable_now(person)
    return make_email(person, period_key="2026-W49", send_after=lease_from(timezone.now()))


def status_of(email: Email) -> str:
    return Email.objects.values_list("status", flat=True).get(pk=email.pk)


def kill(worker: object) -> None:
    worker.send_signal(signal.SIGKILL)  # type: ignore[attr-defined]
    worker.wait()  # type: ignore[attr-defined]


def test_a_worker_killed_before_the_end_of_the_email_sends_it_within_two_minutes_of_its_restart(
    user: User, server: ScriptedSmtpServer, model_server: ModelServer
) -> None:
    email = planned_and_handed_out(user)
    server.script(Script(hold_at_rcpt=True))
    workers = {"smtp_port": server.port, "model_url": model_server.base_url, "name": WORKER}

    with worker_process(**workers) as first:
        send_email.delay(email.pk)
        # Drafted and claimed, the worker waits for the server's answer to RCPT: it dies.
        assert server.held.wait(timeout=60), "the first worker never reached the SMTP server"
        kill(first)

    claimed = Email.objects.get(pk=email.pk)
    assert claimed.status == "sending" and claimed.body_sent_at is None
    assert claimed.claimed_by.startswith(f"{WORKER}@")
    with worker_process(**workers):
        server.wait_for_messages(1, timeout=RESTARTED_WITHIN_SECONDS)
        wait_until(lambda: status_of(email) == "sent", "the restarted worker to record it")

    assert server.message_ids == [claimed.provider_message_id]
    sent = Email.objects.get(pk=email.pk)
    assert sent.attempts == 2 and sent.claimed_at > claimed.claimed_at


def test_a_worker_killed_waiting_for_the_reply_to_the_end_leaves_the_email_unconfirmed_never_sent_again(
    user: User, server: ScriptedSmtpServer, model_server: ModelServer
) -> None:
    email = planned_and_handed_out(user)
    # The server has the whole email and sits on its reply: the worker waits, and dies.
    server.script(Script(end_of_data_delay=600))
    workers = {"smtp_port": server.port, "model_url": model_server.base_url, "name": WORKER}

    with worker_process(**workers) as first:
        send_email.delay(email.pk)
        server.wait_for_messages(1, timeout=60)
        kill(first)

    with worker_process(**workers):
        wait_until(lambda: status_of(email) == "sent_unconfirmed", "the restart to record it unconfirmed")
        # A second delivery of its task, and the dispatcher long after every limit.
        send_email.delay(email.pk)
        assert emails_dispatch_due(now=timezone.now() + timedelta(days=2)) == 0
        # Fetched, then finished by the warm shutdown that ends this block.
        wait_until(lambda: tasks_waiting_in_redis() == 0, "the second delivery to be taken")

    unconfirmed = Email.objects.get(pk=email.pk)
    assert server.message_ids == [unconfirmed.provider_message_id]
    assert server.connections == 1
    assert unconfirmed.attempts == 1 and unconfirmed.sent_at == unconfirmed.body_sent_at
    assert "it may have been delivered, so it is not sent again" in unconfirmed.error


def test_the_emails_queued_behind_a_killed_workers_send_go_out_after_its_restart(
    user: User, server: ScriptedSmtpServer, model_server: ModelServer
) -> None:
    emails = [planned_and_handed_out(person) for person in (user, *map(make_user, ("b@example.com", "c@example.com")))]
    server.script(Script(hold_at_rcpt=True))
    workers = {"smtp_port": server.port, "model_url": model_server.base_url, "name": WORKER}

    with worker_process(**workers) as first:
        for email in emails:
            send_email.delay(email.pk)
        assert server.held.wait(timeout=60), "the first worker never reached the SMTP server"
        kill(first)

    with worker_process(**workers):
        server.wait_for_messages(len(emails), timeout=RESTARTED_WITHIN_SECONDS)
        wait_until(lambda: all(status_of(email) == "sent" for email in emails), "every email to be recorded")

    ids = Email.objects.filter(pk__in=[email.pk for email in emails]).values_list("provider_message_id", flat=True)
    assert Counter(server.message_ids) == dict.fromkeys(ids, 1)
