"""Sending follows RFC 5321: a failure before the end of the email is retried and the
email sent once later; once its end went, the client waits for the reply as long as the
RFC says, and an email whose reply never came is recorded sent-unconfirmed and never
sent again: not by a retry, not by the dispatcher, not by a second task.

The SMTP server is the tests' own (tests/emails/scripted_smtp.py): what it received is
counted in the bytes it got, by Message-ID. Timeouts are the RFC's, shortened to fit a
test; Django's own SMTP backend is given as short a timeout, so code that sent through it
would time out too.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import User
from emails.ledger import emails_release_dead
from emails.models import Email
from emails.planning import emails_dispatch_due
from emails.sending import SendOutcome, email_send
from emails.tasks import send_email
from tests.conftest import make_user
from tests.emails.factories import make_email, reachable_now
from tests.emails.scripted_smtp import Script, ScriptedSmtpServer
from tests.emails.workers import in_thread_worker_idle, tasks_waiting_in_redis, wait_until

REPLIES_SECONDS = 0.5
SLOW_REPLY_SECONDS = 2.0
UNCONFIRMED = "sent_unconfirmed"


@pytest.fixture
def server(settings) -> Iterator[ScriptedSmtpServer]:
    """The tests' own SMTP server, with every wait of the client cut to half a second."""
    started = ScriptedSmtpServer().start()
    settings.MAILERS = {"default": started.mailer}
    settings.EMAIL_SMTP_COMMAND_TIMEOUT_SECONDS = REPLIES_SECONDS
    settings.EMAIL_SMTP_DATA_TIMEOUT_SECONDS = REPLIES_SECONDS
    settings.EMAIL_SMTP_BLOCK_TIMEOUT_SECONDS = REPLIES_SECONDS
    settings.EMAIL_SMTP_END_OF_DATA_TIMEOUT_SECONDS = REPLIES_SECONDS
    settings.EMAIL_RETRY_BACKOFF_SECONDS = 0.1
    yield started
    started.stop()


def drafted(user: User, period_key: str = "2026-W01") -> Email:
    reachable_now(user)
    return make_email(user, period_key=period_key, subject="Your long run", body="Hi,\n\nHow did it go?")


def status_of(email: Email) -> str:
    return Email.objects.values_list("status", flat=True).get(pk=email.pk)


def message_id_of(email: Email) -> str:
    return Email.objects.values_list("provider_message_id", flat=True).get(pk=email.pk)


# After the end of the email: wait, and never send it again ---------------------------------


@pytest.mark.usefixtures("celery_worker")
def test_a_server_that_answers_the_end_of_the_email_too_late_gets_each_email_once_and_it_is_unconfirmed(
    server: ScriptedSmtpServer,
) -> None:
    people = [make_user(f"runner{n}@example.com") for n in range(3)]
    emails = [drafted(person) for person in people]
    server.script(*[Script(end_of_data_delay=SLOW_REPLY_SECONDS)] * 10)

    for email in emails:
        send_email.delay(email.pk)
    wait_until(
        lambda: all(status_of(email) == UNCONFIRMED for email in emails) and in_thread_worker_idle(),
        "every email to be recorded unconfirmed",
    )
    # Whatever comes next, nothing is sent again: a second delivery of each task, and the
    # dispatcher long after every lease and stale limit would have passed.
    for email in emails:
        send_email.delay(email.pk)
    assert emails_dispatch_due(now=timezone.now() + timedelta(days=2)) == 0
    wait_until(lambda: tasks_waiting_in_redis() == 0 and in_thread_worker_idle(), "the second deliveries to finish")

    assert Counter(server.message_ids) == {message_id_of(email): 1 for email in emails}
    for email in Email.objects.filter(pk__in=[email.pk for email in emails]):
        assert (email.status, email.attempts) == (UNCONFIRMED, 1)
        assert email.sent_at is not None and email.sent_at == email.body_sent_at
        assert email.error.startswith("the server took the whole message and gave no reply to its end")
        assert email.error.endswith("it may have been delivered, so it is not sent again")


def test_the_reply_to_the_end_of_the_email_is_awaited_longer_than_a_command_reply(
    user: User, server: ScriptedSmtpServer, settings
) -> None:
    settings.EMAIL_SMTP_END_OF_DATA_TIMEOUT_SECONDS = SLOW_REPLY_SECONDS * 3
    email = drafted(user)
    server.script(Script(end_of_data_delay=SLOW_REPLY_SECONDS))

    assert email_send(email_id=email.pk) == SendOutcome.SENT

    assert server.message_ids == [message_id_of(email)]
    assert status_of(email) == "sent"


def test_a_refusal_in_reply_to_the_end_of_the_email_is_an_answer_and_is_retried(
    user: User, server: ScriptedSmtpServer
) -> None:
    email = drafted(user)
    server.script(Script(end_of_data_reply="451 4.3.0 Try again later"))

    with pytest.raises(Exception, match="SMTP 451"):
        email_send(email_id=email.pk)
    assert status_of(email) == "queued"
    assert email_send(email_id=email.pk) == SendOutcome.SENT

    # The server said no to the first copy, so it was never its to deliver.
    assert server.message_ids == [message_id_of(email)] * 2
    sent = Email.objects.get(pk=email.pk)
    assert (sent.status, sent.attempts, sent.error) == ("sent", 2, "")


# Before the end of the email: temporary, retried, sent once --------------------------------


@pytest.mark.usefixtures("celery_worker")
@pytest.mark.parametrize(
    ("failure", "error"),
    [
        (Script(greeting_delay=SLOW_REPLY_SECONDS), "while connecting or waiting for the greeting"),
        (Script(rcpt_reply="450 4.2.1 Mailbox busy"), "SMTP refused the recipient: 450 4.2.1 Mailbox busy"),
    ],
    ids=["no greeting in time", "450 at RCPT"],
)
def test_a_failure_before_the_end_of_the_email_is_retried_and_the_email_sent_once(
    user: User, server: ScriptedSmtpServer, failure: Script, error: str, caplog: pytest.LogCaptureFixture
) -> None:
    email = drafted(user)
    server.script(failure)

    with caplog.at_level("INFO"):
        send_email.delay(email.pk)
        wait_until(lambda: status_of(email) == "sent" and in_thread_worker_idle(), "the retry to send it")

    assert server.connections == 2
    assert server.message_ids == [message_id_of(email)]
    sent = Email.objects.get(pk=email.pk)
    assert (sent.attempts, sent.error) == (2, "")
    assert any(error in record.getMessage() for record in caplog.records)


@pytest.mark.usefixtures("celery_worker")
def test_a_server_that_refuses_connections_gets_the_email_once_it_listens(
    user: User, server: ScriptedSmtpServer, settings
) -> None:
    settings.EMAIL_RETRY_BACKOFF_SECONDS = 0.5
    email = drafted(user)
    server.stop()

    send_email.delay(email.pk)
    wait_until(lambda: "ConnectionRefusedError" in Email.objects.get(pk=email.pk).error, "the first try to fail")
    revived = ScriptedSmtpServer(port=server.port).start()
    try:
        wait_until(lambda: status_of(email) == "sent" and in_thread_worker_idle(), "the retry to send it")
        assert revived.message_ids == [message_id_of(email)]
    finally:
        revived.stop()


@pytest.mark.usefixtures("transactional_db")
def test_a_claim_released_while_its_sender_still_lives_is_not_sent_by_that_sender(
    user: User, server: ScriptedSmtpServer, settings
) -> None:
    email = drafted(user)
    # The sender waits for the greeting while its claim is handed on (taken for dead: its
    # heartbeats held up by a database that was away, say): it must then stop short of the
    # end of the email.
    # Greeted only once its claim is handed on, however slow the machine (and given the time
    # to wait for that: this is not about a server too slow to greet).
    settings.EMAIL_SMTP_COMMAND_TIMEOUT_SECONDS = 60
    greet = threading.Event()
    server.script(Script(greeting_after=greet))
    outcome: list[SendOutcome] = []
    sender = threading.Thread(target=lambda: outcome.append(email_send(email_id=email.pk, worker="mailer-1@host")))

    sender.start()
    server.wait_for_connections(1)
    settings.EMAIL_CLAIM_SILENT_SECONDS = 0
    released = emails_release_dead(now=timezone.now())
    greet.set()
    sender.join(timeout=30)

    assert (released.requeued, released.unconfirmed) == ([email.pk], [])
    assert outcome == [SendOutcome.NOT_OURS]
    assert server.received == []
    assert status_of(email) == "queued"
