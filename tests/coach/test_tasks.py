"""Ending idle sessions and writing their summaries."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import User
from coach.claims import message_retry, turn_claim
from coach.models import ChatSession, Message
from coach.services import session_end
from coach.tasks import end_idle_sessions, summarise_ended_sessions, summarise_session, sweep_stale_turns
from offline_coach import ModelServer
from tests.coach.factories import make_session

pytestmark = pytest.mark.django_db


def idle_for(session: ChatSession, minutes: int) -> None:
    ChatSession.objects.filter(pk=session.pk).update(last_message_at=timezone.now() - timedelta(minutes=minutes))


def test_idle_sessions_are_ended_and_summarised(user: User, model_server: ModelServer, celery_eager: None) -> None:
    idle = make_session(user, "I ran 5 km today", "Great, how did your knee feel?", "Fine, no pain", "Good.")
    active = make_session(user, "Hello", "Hi!")
    idle_for(idle, 31)
    idle_for(active, 5)

    assert end_idle_sessions() == 1
    assert summarise_ended_sessions() == 1

    idle.refresh_from_db()
    active.refresh_from_db()
    assert idle.ended_at is not None and active.ended_at is None
    assert idle.summary and idle.summarised_at is not None
    request = model_server.chat_requests()[-1]
    assert ModelServer.system_prompt(request).startswith("# Session summary")
    # Each message whole under who said it, so a list the coach wrote still reads as one.
    assert request["messages"][1]["content"] == (
        "Person:\nI ran 5 km today\n\nCoach:\nGreat, how did your knee feel?\n\nPerson:\nFine, no pain\n\nCoach:\nGood."
    )


def test_an_ended_session_is_summarised_once(user: User, model_server: ModelServer, celery_eager: None) -> None:
    session = make_session(user, "Hello", "Hi!")

    assert session_end(session=session) is True
    assert session_end(session=session) is False
    assert summarise_ended_sessions() == 1
    assert summarise_ended_sessions() == 0
    summarise_session(session.pk)

    assert len(model_server.chat_requests()) == 1


def test_a_model_outage_is_retried_and_the_summary_still_written(user: User, model_server: ModelServer) -> None:
    session = make_session(user, "Hello", "Hi!")
    model_server.queue_error(503)

    # apply() runs the task here, and its retry too (the countdown is not waited out).
    summarise_session.apply(args=[session.pk], throw=False)

    session.refresh_from_db()
    assert session.summary
    assert len(model_server.chat_requests()) == 2


def test_a_summary_the_model_refuses_for_good_is_not_retried(user: User, model_server: ModelServer) -> None:
    session = make_session(user, "Hello", "Hi!")
    model_server.queue_error(400)

    summarise_session.apply(args=[session.pk], throw=False)

    session.refresh_from_db()
    assert session.summary == ""
    assert len(model_server.chat_requests()) == 1


def test_a_turn_whose_process_died_is_handed_back_for_retry(user: User, settings) -> None:
    session = make_session(user)
    now = timezone.now()
    overdue = now - timedelta(seconds=settings.COACH_TURN_DEADLINE_SECONDS + 31)
    stuck = Message.objects.create(
        session=session, role="user", content="Hello", status="answering", claimed_at=overdue
    )
    running = Message.objects.create(session=session, role="user", content="Again", status="answering", claimed_at=now)
    never_started = Message.objects.create(session=session, role="user", content="Hm", status="pending")
    Message.objects.filter(pk=never_started.pk).update(created_at=overdue, waiting_since=overdue)

    assert sweep_stale_turns() == 2

    assert Message.objects.get(pk=stuck.pk).status == "failed"
    assert Message.objects.get(pk=never_started.pk).status == "failed"
    assert Message.objects.get(pk=running.pk).status == "answering"


def test_a_retry_of_a_message_that_failed_long_ago_is_not_swept_while_it_runs(user: User) -> None:
    """The sweeper judges a turn by its claim, never by when its message was written."""
    session = make_session(user)
    old = Message.objects.create(session=session, role="user", content="Hello", status="failed")
    Message.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=3))
    old.refresh_from_db()

    assert message_retry(message=old)
    assert turn_claim(message_id=old.pk, user_id=user.pk, now=timezone.now())
    sweep_stale_turns()

    assert Message.objects.get(pk=old.pk).status == "answering"
