"""The scheduler's jobs (planned by beat: see CELERY_BEAT_SCHEDULE) and the send task.

Each task takes ids, if any, and calls one service. No service imports this module:
planning publishes the tasks it needs through WORKERS (below), which emails/apps.py
hands it. Nothing waits on a countdown or ETA longer than Redis's visibility timeout
(past it, Redis would hand the task to a second worker): an email that must wait is a
row with a due time, which dispatch_due_emails picks up.
"""

from __future__ import annotations

from celery import Task, shared_task
from celery.signals import worker_ready
from celery.worker.consumer import Consumer
from django.conf import settings

from emails.outbox import mail_send_due
from emails.planning import (
    Workers,
    check_ins_plan,
    emails_dispatch_due,
    emails_hand_out,
    emails_worker_started,
    nudges_plan,
    session_recaps_plan,
    weekly_episode_write,
    weekly_episodes_plan,
)
from emails.sending import EmailTemporaryFailure, email_give_up, email_send
from infra.dbsteps import release_connection


def retry_countdown(retries: int) -> float:
    """Exponential backoff from EMAIL_RETRY_BACKOFF_SECONDS, capped at a quarter of the
    visibility timeout: a retry waits in the worker, never long enough to be redelivered."""
    return min(settings.EMAIL_RETRY_BACKOFF_SECONDS * 2.0**retries, settings.CELERY_VISIBILITY_TIMEOUT_SECONDS / 4)


@shared_task(bind=True, ignore_result=True)
def send_outgoing_mail(self: Task[[], int]) -> int:
    """Every few seconds: the mail people are waiting for (sign-up, password reset, sign-in
    codes) whose time has come is sent, each once; what SMTP refuses for now waits and is
    tried again, and what a dead sender held is handed on first."""
    return mail_send_due(worker=self.request.hostname)


@shared_task(ignore_result=True)
def plan_check_ins() -> int:
    """Every quarter hour: an open intention coming up within MEMORY_PROSPECTIVE_LEAD_DAYS
    gets its check-in email, if this is a good time to write to the person."""
    return check_ins_plan()


@shared_task(ignore_result=True)
def plan_nudges() -> int:
    """Every quarter hour: everyone due a nudge (by their frequency and their last email),
    in their sending hours, who has chatted and not unsubscribed, gets one planned."""
    return nudges_plan()


@shared_task(ignore_result=True)
def plan_session_recaps() -> int:
    """Every minute: a session summarised lately gets its recap, for those who asked."""
    return session_recaps_plan()


@shared_task(ignore_result=True)
def dispatch_due_emails() -> int:
    """Every few seconds: the claims of senders that died are handed on, and queued emails
    whose time has come go to a worker."""
    return emails_dispatch_due()


@shared_task(ignore_result=True)
def plan_weekly_episodes() -> int:
    """Every hour: each person's week whose Sunday evening has come is asked to be written
    up, until it is (or is too old): a failed or lost write is asked for again later."""
    return weekly_episodes_plan()


@shared_task(acks_late=True, ignore_result=True)
def hand_out_emails(email_ids: list[int]) -> int:
    """A batch of planned emails becomes one send task each. Delivered twice (its worker
    died), some emails get two send tasks: the claim sends each once all the same."""
    return emails_hand_out(email_ids=email_ids)


# acks_late: a worker that dies mid-task leaves the message unacknowledged, and Redis
# hands it to another worker after the visibility timeout; the ledger's claim makes
# that second delivery send the email once, not twice. Long before then, the claim's
# heartbeat has stopped and the dispatcher has handed the email on (emails/claims.py).
@shared_task(bind=True, acks_late=True, ignore_result=True)
def send_email(self: Task[[int], str], email_id: int) -> str:
    """Draft, claim and send one planned email. Temporary failures (SMTP 4xx, a dropped
    connection, a model outage, all before the end of the email went) are retried with
    backoff up to EMAIL_SEND_MAX_RETRIES, then recorded failed; permanent ones are
    recorded failed at once; one the server never answered is sent-unconfirmed."""
    try:
        return email_send(
            email_id=email_id, worker=self.request.hostname, retry_in=retry_countdown(self.request.retries)
        )
    except EmailTemporaryFailure as failure:
        if self.request.retries >= settings.EMAIL_SEND_MAX_RETRIES:
            email_give_up(email_id=email_id, error=str(failure))
            return "failed"
        raise self.retry(countdown=retry_countdown(self.request.retries), exc=failure) from failure


@shared_task(acks_late=True, ignore_result=True)
def write_weekly_episode(user_id: int, week_key: str) -> None:
    """Summarise one person's week as a weekly episode memory, once. A model that fails is
    not retried here: the week stays due, and the hourly planner asks again after a
    growing pause, as it does for a task that was lost."""
    weekly_episode_write(user_id=user_id, week_key=week_key)


@worker_ready.connect
def release_claims_of_the_last_run(sender: Consumer, **_: object) -> None:
    """A worker starts, perhaps after one on this host died with claims still held (SIGKILL,
    a crash, the machine's out-of-memory killer). Before it takes a task, the claims of
    senders that died are handed on and what is due handed out, so the emails they held go
    out seconds after the restart, not at the dispatcher's next tick."""
    del sender
    try:
        emails_worker_started()
    finally:
        # The worker's main process runs no tasks: it keeps no connection.
        release_connection()


# How planning publishes these tasks (emails/apps.py hands it over): through each task's
# own `delay`, which honours Celery's eager mode (publishing by name, `send_task`, would
# not), looked up at each call, so a `delay` replaced after the app started (a benchmark
# timing its publications) is the one used.
WORKERS = Workers(
    send_email=lambda email_id: send_email.delay(email_id),
    hand_out_emails=lambda email_ids: hand_out_emails.delay(email_ids),
    write_weekly_episode=lambda user_id, week_key: write_weekly_episode.delay(user_id, week_key),
)
