"""Session recaps after a summary, per preference, and the dispatcher that hands out what
waited: an email kept back by quiet hours, a task that was lost, a dead worker's claim."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from socket import gethostname

import pytest
from django.core import mail
from django.utils import timezone

from accounts.models import User
from coach.models import ChatSession
from coach.services import session_end
from coach.tasks import summarise_ended_sessions
from emails.claims import claim_holder
from emails.models import Email
from emails.planning import emails_dispatch_due, emails_worker_started, session_recap_plan, session_recaps_plan
from offline_coach import ModelServer
from tests.coach.factories import make_session
from tests.emails.factories import make_email, prefer, reachable_now

pytestmark = pytest.mark.django_db

NIGHT = datetime(2026, 11, 30, 23, 0, tzinfo=UTC)
NEXT_MORNING = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def handed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The ids handed to the send task once committed (the task itself is not run)."""
    from emails.tasks import send_email

    ids: list[int] = []
    monkeypatch.setattr(send_email, "delay", ids.append)
    return ids


@pytest.fixture
def committed(django_capture_on_commit_callbacks) -> Callable[[], AbstractContextManager[object]]:
    """A block whose on-commit callbacks run at its end, as after a real commit."""
    return lambda: django_capture_on_commit_callbacks(execute=True)


def summarised(user: User) -> ChatSession:
    session = make_session(user, "I finished chapter three", "Wonderful. What's next?")
    ChatSession.objects.filter(pk=session.pk).update(
        summary="They finished chapter three and will outline chapter four.", summarised_at=timezone.now()
    )
    return ChatSession.objects.get(pk=session.pk)


# Recaps -----------------------------------------------------------------------------------


def test_a_session_summary_is_followed_by_a_recap_for_someone_who_asked(
    user: User, model_server: ModelServer, celery_eager: None, django_capture_on_commit_callbacks
) -> None:
    reachable_now(user, session_summaries=True)
    session = make_session(user, "I finished chapter three", "Wonderful. What's next?")

    session_end(session=session)
    summarise_ended_sessions()
    # The summary is a fact the recap planner picks up on its next tick.
    with django_capture_on_commit_callbacks(execute=True):
        session_recaps_plan()

    recap = Email.objects.get(kind="session_summary")
    assert (recap.status, recap.period_key, recap.session_id) == ("sent", f"session-{session.pk}", session.pk)
    assert len(mail.outbox) == 1
    session.refresh_from_db()
    asked = model_server.chat_requests()[-1]["messages"][-1]["content"]
    assert asked.endswith("Session summary: " + " ".join(session.summary.split()))


def test_no_recap_for_someone_who_did_not_ask(
    user: User, model_server: ModelServer, celery_eager: None, django_capture_on_commit_callbacks
) -> None:
    reachable_now(user, session_summaries=False)
    session = make_session(user, "Hello", "Hi!")

    session_end(session=session)
    summarise_ended_sessions()
    # The summary is a fact the recap planner picks up on its next tick.
    with django_capture_on_commit_callbacks(execute=True):
        session_recaps_plan()

    assert not Email.objects.exists() and mail.outbox == []


def test_a_recap_of_a_late_session_waits_for_the_morning(user: User, handed: list[int], committed) -> None:
    prefer(user, time_zone="UTC", session_summaries=True)
    session = summarised(user)

    with committed():
        recap = session_recap_plan(session_id=session.pk, now=NIGHT)
        assert emails_dispatch_due(now=NEXT_MORNING - timedelta(minutes=1)) == 0
    assert recap is not None and recap.send_after == NEXT_MORNING
    assert handed == []

    with committed():
        assert emails_dispatch_due(now=NEXT_MORNING) == 1
    assert handed == [recap.pk]


def test_a_session_is_recapped_once_however_often_it_is_summarised(user: User, handed: list[int]) -> None:
    prefer(user, time_zone="UTC", session_summaries=True)
    session = summarised(user)

    assert session_recap_plan(session_id=session.pk, now=NEXT_MORNING) is not None
    assert session_recap_plan(session_id=session.pk, now=NEXT_MORNING) is None
    assert Email.objects.filter(kind="session_summary").count() == 1


def test_the_recap_planner_plans_each_summarised_session_once(
    user: User, other_user: User, handed: list[int], committed
) -> None:
    reachable_now(user, session_summaries=True)
    reachable_now(other_user, session_summaries=False)
    wanted, unwanted = summarised(user), summarised(other_user)

    with committed():
        assert session_recaps_plan() == 1
        assert session_recaps_plan() == 0

    assert list(Email.objects.values_list("session_id", flat=True)) == [wanted.pk]
    assert unwanted.pk not in handed and len(handed) == 1


def test_a_session_summarised_days_ago_gets_no_recap_late(user: User, handed: list[int]) -> None:
    reachable_now(user, session_summaries=True)
    session = summarised(user)
    ChatSession.objects.filter(pk=session.pk).update(summarised_at=timezone.now() - timedelta(days=2))

    assert session_recaps_plan() == 0
    assert not Email.objects.exists()


def test_no_recap_is_planned_for_someone_who_unsubscribed(user: User, handed: list[int]) -> None:
    reachable_now(user, session_summaries=True, unsubscribed_at=timezone.now())
    summarised(user)

    assert session_recaps_plan() == 0


# Dispatch -------------------------------------------------------------------------------


def test_an_email_handed_out_is_not_handed_out_again_while_its_task_waits(
    user: User, handed: list[int], committed, settings
) -> None:
    now = timezone.now()
    email = make_email(user, send_after=now - timedelta(minutes=1))

    with committed():
        assert emails_dispatch_due(now=now) == 1
        assert emails_dispatch_due(now=now + timedelta(minutes=30)) == 0
        # Past a visibility timeout, a task still not done was lost: it is handed out again.
        lost = now + timedelta(seconds=settings.CELERY_VISIBILITY_TIMEOUT_SECONDS + 1)
        assert emails_dispatch_due(now=lost) == 1
    assert handed == [email.pk, email.pk]


def test_emails_not_yet_due_or_already_done_are_left_alone(user: User, handed: list[int]) -> None:
    now = timezone.now()
    make_email(user, period_key="later", send_after=now + timedelta(hours=2))
    for status in ("sent", "failed", "skipped"):
        make_email(user, period_key=status, status=status, send_after=now - timedelta(hours=1))

    assert emails_dispatch_due(now=now) == 0


def test_the_claim_of_a_worker_that_died_is_released_after_the_stale_limit(
    user: User, handed: list[int], committed, settings
) -> None:
    now = timezone.now()
    stale = now - timedelta(seconds=settings.EMAIL_CLAIM_STALE_SECONDS + 1)
    abandoned = make_email(user, period_key="abandoned", status="sending", claimed_at=stale)
    busy = make_email(user, period_key="busy", status="sending", claimed_at=now - timedelta(seconds=5))

    with committed():
        assert emails_dispatch_due(now=now) == 1

    assert handed == [abandoned.pk]
    assert Email.objects.get(pk=abandoned.pk).status == "queued"
    assert Email.objects.get(pk=busy.pk).status == "sending"


def test_a_stale_claim_whose_end_had_gone_to_the_server_is_recorded_unconfirmed_never_handed_out(
    user: User, handed: list[int], committed, settings
) -> None:
    now = timezone.now()
    stale = now - timedelta(seconds=settings.EMAIL_CLAIM_STALE_SECONDS + 1)
    went = make_email(user, status="sending", claimed_at=stale, body_sent_at=stale + timedelta(seconds=2))

    with committed():
        assert emails_dispatch_due(now=now) == 0
        assert emails_dispatch_due(now=now + timedelta(days=2)) == 0

    assert handed == []
    unconfirmed = Email.objects.get(pk=went.pk)
    assert unconfirmed.status == "sent_unconfirmed" and unconfirmed.sent_at == unconfirmed.body_sent_at
    assert "it may have been delivered, so it is not sent again" in unconfirmed.error


def test_a_restarted_worker_hands_out_at_once_what_a_dead_process_on_its_host_held(
    user: User, handed: list[int], committed
) -> None:
    now = timezone.now()
    # A process of this host that is no more, and this very one, alive: both just claimed.
    dead_pid = a_pid_that_is_gone()
    dead = make_email(
        user,
        period_key="dead",
        status="sending",
        claimed_at=now,
        claimed_by=f"mailer@host ({gethostname()}:{dead_pid}:0)",
    )
    alive = make_email(user, period_key="alive", status="drafting", claimed_at=now, claimed_by=claim_holder("mailer"))

    with committed():
        assert emails_worker_started(now=now) == 1

    assert handed == [dead.pk]
    assert Email.objects.get(pk=dead.pk).status == "queued"
    assert Email.objects.get(pk=alive.pk).status == "drafting"


def a_pid_that_is_gone() -> int:
    """The pid of a process of this host that ran, ended and was collected."""
    ended = subprocess.Popen(["true"])
    ended.wait()
    return ended.pid
