"""A worker killed while it drafts or sends a follow-up email (SIGKILL: no warm shutdown, no
goodbye), whole (a container killed, or the out-of-memory killer taking its group) or only
the pool process running the task (what the out-of-memory killer picks), and a worker
frozen mid-send; against real worker and beat processes, the SMTP server holding the
exchange where the fault is to land:

- killed while the model drafts, or before the end of the email went, its email is handed
  on as soon as its process is known gone (or its heartbeat silent) and sent once, by a
  live worker or by the killed one's next pool process, within the minute;
- killed while it waited for the reply to the end, the email may have been delivered: it
  is recorded sent-unconfirmed, and never sent again;
- frozen, its heartbeat stops: another worker sends the email, and the frozen one, thawed,
  sends nothing;
- started again under its name, a worker hands out at once what its predecessor held, and
  the emails queued behind it.

Redis's visibility timeout and the stale-claim limit are an hour here, as in production:
neither can be what sends the emails again within the tests' minute.
"""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from accounts.models import User
from emails.models import Email
from emails.planning import emails_dispatch_due, lease_from
from emails.tasks import send_email
from offline_coach import ModelServer
from tests.conftest import make_user
from tests.emails.factories import make_email, reachable_now
from tests.emails.scripted_smtp import Script, ScriptedSmtpServer
from tests.emails.workers import (
    beat_process,
    kill_alone,
    kill_whole,
    pool_processes,
    tasks_waiting_in_redis,
    wait_until,
    worker_process,
)

pytestmark = pytest.mark.usefixtures("transactional_db")

# Far above what a handover takes (one dispatch tick after the holder is known dead, or
# its heartbeat ten seconds silent): a generous bound for a busy machine, a minute short
# of the old lease.
HANDED_ON_WITHIN_SECONDS = 90.0
WORKER = "mailer"
# The model takes this long to draft the first email: the worker is killed meanwhile.
DRAFTING_SECONDS = 120.0


def planned_and_handed_out(person: User, *, drafted: bool = True) -> Email:
    """An email as planning leaves it once its task is queued: leased, so the dispatcher
    leaves it to that task for a visibility timeout (drafted already, or not yet)."""
    reachable_now(person)
    text = {"subject": "Your long run", "body": "Hi,\n\nHow did it go?"} if drafted else {}
    return make_email(person, period_key="2026-W49", send_after=lease_from(timezone.now()), **text)


def status_of(email: Email) -> str:
    return Email.objects.values_list("status", flat=True).get(pk=email.pk)


def sent_once(email: Email, workers_smtp: ScriptedSmtpServer) -> Email:
    """The email, once recorded sent, having arrived exactly once."""
    workers_smtp.wait_for_messages(1, timeout=HANDED_ON_WITHIN_SECONDS)
    wait_until(lambda: status_of(email) == "sent", "it to be recorded sent")
    sent = Email.objects.get(pk=email.pk)
    assert workers_smtp.message_ids == [sent.provider_message_id]
    return sent


def test_a_worker_killed_whole_while_the_model_drafts_leaves_its_email_to_a_live_worker_which_sends_it_once(
    user: User, workers_smtp: ScriptedSmtpServer, model_server: ModelServer, processes: dict, tmp_path: Path
) -> None:
    email = planned_and_handed_out(user, drafted=False)
    model_server.queue_text("never read", delay_seconds=DRAFTING_SECONDS)

    with worker_process(**processes, name=WORKER) as first:
        send_email.delay(email.pk)
        wait_until(lambda: len(model_server.chat_requests()) == 1, "the model to be asked for the draft")
        kill_whole(first)
    drafting = Email.objects.get(pk=email.pk)
    assert (drafting.status, drafting.subject) == ("drafting", None)

    with worker_process(**processes, name="another"), beat_process(**processes, folder=tmp_path):
        sent = sent_once(email, workers_smtp)

    # Drafted again by the live worker (the offline coach, this time at once), then sent.
    assert len(model_server.chat_requests()) >= 2
    assert sent.attempts == 2 and sent.claimed_by.startswith("another@")


def test_a_pool_process_killed_alone_while_the_model_drafts_leaves_the_email_to_the_next_one(
    user: User, workers_smtp: ScriptedSmtpServer, model_server: ModelServer, processes: dict, tmp_path: Path
) -> None:
    email = planned_and_handed_out(user, drafted=False)
    model_server.queue_text("never read", delay_seconds=DRAFTING_SECONDS)

    with worker_process(**processes, name=WORKER) as worker, beat_process(**processes, folder=tmp_path):
        send_email.delay(email.pk)
        wait_until(lambda: len(model_server.chat_requests()) == 1, "the model to be asked for the draft")
        # Read now, the one pool process is the one drafting: on a loaded machine Celery may
        # have replaced a pool process slow to start before any task reached it.
        [pool] = pool_processes(worker)
        drafting = Email.objects.get(pk=email.pk)
        kill_alone(pool)
        # The worker lives on, with a pool process of its own again, which sends it.
        sent = sent_once(email, workers_smtp)
        assert worker.poll() is None

    assert drafting.status == "drafting" and f":{pool}:" in drafting.claimed_by
    assert sent.attempts == 2 and f":{pool}:" not in sent.claimed_by


def test_a_pool_process_killed_alone_before_the_end_of_the_email_has_it_sent_once_by_the_next(
    user: User, workers_smtp: ScriptedSmtpServer, processes: dict, tmp_path: Path
) -> None:
    email = planned_and_handed_out(user)
    workers_smtp.script(Script(hold_at_rcpt=True))

    with worker_process(**processes, name=WORKER) as worker, beat_process(**processes, folder=tmp_path):
        send_email.delay(email.pk)
        # Claimed, the pool process waits for the server's answer to RCPT: it dies.
        assert workers_smtp.held.wait(timeout=60), "the worker never reached the SMTP server"
        [pool] = pool_processes(worker)
        claimed = Email.objects.get(pk=email.pk)
        kill_alone(pool)
        sent = sent_once(email, workers_smtp)

    assert (claimed.status, claimed.body_sent_at) == ("sending", None)
    assert f":{pool}:" in claimed.claimed_by
    assert sent.attempts == 2 and sent.claimed_at > claimed.claimed_at


def test_a_worker_killed_whole_waiting_for_the_reply_to_the_end_leaves_the_email_unconfirmed_never_sent_again(
    user: User, workers_smtp: ScriptedSmtpServer, processes: dict, tmp_path: Path
) -> None:
    email = planned_and_handed_out(user)
    # The server has the whole email and sits on its reply: the worker waits, and dies.
    workers_smtp.script(Script(end_of_data_delay=600))

    with worker_process(**processes, name=WORKER) as first:
        send_email.delay(email.pk)
        workers_smtp.wait_for_messages(1, timeout=60)
        kill_whole(first)

    with worker_process(**processes, name="another"), beat_process(**processes, folder=tmp_path):
        wait_until(
            lambda: status_of(email) == "sent_unconfirmed",
            "the dead worker's claim to be recorded unconfirmed",
            timeout=HANDED_ON_WITHIN_SECONDS,
        )
        # A second delivery of its task, and the dispatcher long after every limit.
        send_email.delay(email.pk)
        assert emails_dispatch_due(now=timezone.now() + timedelta(days=2)) == 0
        wait_until(lambda: tasks_waiting_in_redis() == 0, "the second delivery to be taken")

    unconfirmed = Email.objects.get(pk=email.pk)
    assert workers_smtp.message_ids == [unconfirmed.provider_message_id]
    assert workers_smtp.connections == 1
    assert unconfirmed.attempts == 1 and unconfirmed.sent_at == unconfirmed.body_sent_at
    assert "it may have been delivered, so it is not sent again" in unconfirmed.error


def test_a_frozen_worker_has_its_email_sent_by_another_and_thawed_sends_nothing(
    user: User, workers_smtp: ScriptedSmtpServer, processes: dict, tmp_path: Path
) -> None:
    email = planned_and_handed_out(user)
    # The first connection greets only once its worker is frozen: it stops there, short of the end.
    greet = threading.Event()
    workers_smtp.script(Script(greeting_after=greet))

    with worker_process(**processes, name=WORKER) as frozen:
        send_email.delay(email.pk)
        workers_smtp.wait_for_connections(1)
        [pool] = pool_processes(frozen)
        os.kill(pool, signal.SIGSTOP)
        greet.set()
        try:
            with worker_process(**processes, name="another"), beat_process(**processes, folder=tmp_path):
                # Its heartbeat silent, its process still there: handed on all the same.
                sent = sent_once(email, workers_smtp)
        finally:
            os.kill(pool, signal.SIGCONT)
        # Thawed, it finds the email no longer its own before the end of the data, and
        # hangs up without it.
        workers_smtp.wait_for_closed(workers_smtp.connections)

    assert workers_smtp.message_ids == [sent.provider_message_id]
    assert Email.objects.get(pk=email.pk).status == "sent"


def test_a_worker_restarted_under_its_name_hands_out_what_it_held_and_the_emails_queued_behind(
    user: User, workers_smtp: ScriptedSmtpServer, processes: dict
) -> None:
    emails = [planned_and_handed_out(person) for person in (user, *map(make_user, ("b@example.com", "c@example.com")))]
    workers_smtp.script(Script(hold_at_rcpt=True))

    with worker_process(**processes, name=WORKER) as first:
        for email in emails:
            send_email.delay(email.pk)
        assert workers_smtp.held.wait(timeout=60), "the first worker never reached the SMTP server"
        kill_whole(first)

    # No beat: the restart itself hands on what its dead predecessor on this host held.
    with worker_process(**processes, name=WORKER):
        workers_smtp.wait_for_messages(len(emails), timeout=HANDED_ON_WITHIN_SECONDS)
        wait_until(lambda: all(status_of(email) == "sent" for email in emails), "every email to be recorded")

    ids = Email.objects.filter(pk__in=[email.pk for email in emails]).values_list("provider_message_id", flat=True)
    assert Counter(workers_smtp.message_ids) == dict.fromkeys(ids, 1)
