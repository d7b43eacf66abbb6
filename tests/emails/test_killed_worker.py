"""A worker killed in the middle of sending: Redis hands its unacknowledged task to
another worker, which takes over the stale claim and sends the email, once.

The workers are processes of their own (`celery -A coach worker`), so one can be killed
with SIGKILL: no warm shutdown, no chance to give the task back. The SMTP server holds the
first message unanswered, so the kill lands after the claim and before the send, every time.
"""

from __future__ import annotations

import signal

import pytest
from django.utils import timezone

from accounts.models import User
from coach.celery import app
from emails.models import Email
from emails.tasks import send_email
from offline_coach import ModelServer
from tests.emails.factories import make_email, reachable_now
from tests.emails.smtp_sink import SmtpSink
from tests.emails.workers import tasks_left_in_redis, wait_until, worker_process

pytestmark = pytest.mark.usefixtures("transactional_db")


def status_of(email: Email) -> str:
    return Email.objects.values_list("status", flat=True).get(pk=email.pk)


def test_a_worker_killed_before_sending_leaves_the_email_to_another_which_sends_it_once(
    user: User, smtp_sink: SmtpSink, model_server: ModelServer
) -> None:
    app.control.purge()
    reachable_now(user)
    email = make_email(user)
    smtp_sink.hold_next()
    workers = {"smtp_port": smtp_sink.port, "model_url": model_server.base_url}

    with worker_process(**workers) as first:
        send_email.delay(email.pk)
        # The worker drafted and claimed the email and is in the middle of the SMTP
        # exchange, the server not having answered: now it dies, without a goodbye.
        assert smtp_sink.held.wait(timeout=60), "the first worker never reached the SMTP server"
        assert status_of(email) == "sending"
        first.send_signal(signal.SIGKILL)
        first.wait()

    claimed = Email.objects.get(pk=email.pk)
    with worker_process(**workers):
        # Redis hands the unacknowledged task to this worker after the visibility
        # timeout; the claim is stale by then, so it takes the email over.
        wait_until(lambda: status_of(email) == "sent", "the second worker to send it")
        wait_until(lambda: tasks_left_in_redis() == 0, "the task to be acknowledged")

    [message] = smtp_sink.messages
    assert smtp_sink.attempts == 2
    sent = Email.objects.get(pk=email.pk)
    assert sent.attempts == 2 and sent.claimed_at > claimed.claimed_at
    assert message["Message-ID"] == sent.provider_message_id == claimed.provider_message_id
    assert sent.sent_at is not None and sent.sent_at <= timezone.now()
