"""Delivery with a real Celery worker against the test Redis and a real SMTP server: an
email goes out once, whether its task is delivered twice at once or retried after a
temporary refusal; a permanent refusal is recorded, never retried."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from accounts.models import User
from emails.models import Email
from emails.planning import nudges_plan
from emails.tasks import send_email
from tests.coach.factories import make_session
from tests.emails.factories import make_email, reachable_now, settled
from tests.emails.smtp_sink import REFUSE, TRY_LATER, SmtpSink
from tests.emails.workers import in_thread_worker_idle, tasks_left_in_redis, wait_until

pytestmark = pytest.mark.usefixtures("celery_worker")


def status_of(email: Email) -> str:
    return Email.objects.values_list("status", flat=True).get(pk=email.pk)


def sessions_waiting_for_a_row_lock() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(DISTINCT pid) FROM pg_locks WHERE NOT granted")
        return cursor.fetchone()[0]


def test_the_same_send_task_delivered_twice_at_once_sends_one_email(user: User, smtp_sink: SmtpSink) -> None:
    reachable_now(user)
    email = make_email(user)

    # Hold the row while both deliveries run, until both are blocked on it: they then race
    # for it at the same instant, which is exactly what the conditional UPDATEs are for.
    with transaction.atomic():
        Email.objects.select_for_update().get(pk=email.pk)
        send_email.delay(email.pk)
        send_email.delay(email.pk)
        wait_until(lambda: sessions_waiting_for_a_row_lock() == 2, "both deliveries to reach the row")

    wait_until(lambda: status_of(email) == "sent" and in_thread_worker_idle(), "the email to be sent")
    assert len(smtp_sink.messages) == 1 and smtp_sink.attempts == 1
    assert Email.objects.get(pk=email.pk).attempts == 1


def test_a_temporary_smtp_failure_is_retried_and_the_email_goes_out_once(
    user: User, smtp_sink: SmtpSink, settings
) -> None:
    settings.EMAIL_RETRY_BACKOFF_SECONDS = 0.1
    reachable_now(user)
    email = make_email(user)
    smtp_sink.answer_next(TRY_LATER)

    send_email.delay(email.pk)

    wait_until(lambda: status_of(email) == "sent" and in_thread_worker_idle(), "the retry to send it")
    assert smtp_sink.attempts == 2
    assert len(smtp_sink.messages) == 1
    sent = Email.objects.get(pk=email.pk)
    assert sent.attempts == 2 and sent.error == ""


def test_a_temporary_failure_that_outlasts_the_retries_is_marked_failed(
    user: User, smtp_sink: SmtpSink, settings
) -> None:
    settings.EMAIL_RETRY_BACKOFF_SECONDS = 0.05
    settings.EMAIL_SEND_MAX_RETRIES = 2
    reachable_now(user)
    email = make_email(user)
    smtp_sink.answer_next(TRY_LATER, TRY_LATER, TRY_LATER)

    send_email.delay(email.pk)

    wait_until(lambda: status_of(email) == "failed" and in_thread_worker_idle(), "the retries to run out")
    assert smtp_sink.attempts == 3 and smtp_sink.messages == []
    assert Email.objects.get(pk=email.pk).error == f"gave up after 2 retries: SMTP {TRY_LATER.replace(' ', ': ', 1)}"


def test_a_permanent_smtp_failure_is_marked_failed_and_never_retried(user: User, smtp_sink: SmtpSink) -> None:
    reachable_now(user)
    email = make_email(user)
    smtp_sink.answer_next(REFUSE)

    send_email.delay(email.pk)

    wait_until(lambda: status_of(email) == "failed" and in_thread_worker_idle(), "the email to fail")
    assert smtp_sink.attempts == 1
    assert tasks_left_in_redis() == 0
    assert Email.objects.get(pk=email.pk).error == "SMTP 550: 5.1.1 No such user here"


def test_a_nudge_planned_by_the_scheduler_is_sent_by_a_worker_once_the_plan_is_committed(
    user: User, smtp_sink: SmtpSink
) -> None:
    reachable_now(user)
    make_session(user, "I want to run a marathon", "Let's plan it.")
    settled(user)

    assert nudges_plan() == 1

    [message] = smtp_sink.wait_for_messages(1)
    assert message["To"] == user.email
    wait_until(lambda: Email.objects.filter(kind="nudge", status="sent").count() == 1, "the nudge to be recorded")
