"""Ending idle sessions and writing their summaries."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import User
from coach.models import ChatSession, Message
from coach.services import session_end
from coach.tasks import end_idle_sessions, summarise_session
from offline_coach import ModelServer
from tests.coach.factories import make_session

pytestmark = pytest.mark.django_db


def idle_for(session: ChatSession, minutes: int) -> None:
    ChatSession.objects.filter(pk=session.pk).update(last_message_at=timezone.now() - timedelta(minutes=minutes))


def test_idle_sessions_are_ended_and_summarised(
    user: User, model_server: ModelServer, celery_eager: None, django_capture_on_commit_callbacks
) -> None:
    idle = make_session(user, "I ran 5 km today", "Great, how did your knee feel?", "Fine, no pain", "Good.")
    active = make_session(user, "Hello", "Hi!")
    idle_for(idle, 31)
    idle_for(active, 5)

    with django_capture_on_commit_callbacks(execute=True):
        assert end_idle_sessions() == 1

    idle.refresh_from_db()
    active.refresh_from_db()
    assert idle.ended_at is not None and active.ended_at is None
    assert idle.summary and idle.summarised_at is not None
    request = model_server.chat_requests()[-1]
    assert ModelServer.system_prompt(request).startswith("# Session summary")
    assert request["messages"][1]["content"].splitlines() == [
        "User: I ran 5 km today",
        "Coach: Great, how did your knee feel?",
        "User: Fine, no pain",
        "Coach: Good.",
    ]


def test_an_ended_session_is_summarised_once(
    user: User, model_server: ModelServer, celery_eager: None, django_capture_on_commit_callbacks
) -> None:
    session = make_session(user, "Hello", "Hi!")

    with django_capture_on_commit_callbacks(execute=True):
        assert session_end(session=session) is True
        assert session_end(session=session) is False
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


def test_a_turn_whose_process_died_is_handed_back_for_retry(user: User) -> None:
    session = make_session(user)
    stuck = Message.objects.create(session=session, role="user", content="Hello", status="answering")
    Message.objects.filter(pk=stuck.pk).update(created_at=timezone.now() - timedelta(minutes=11))
    fresh = Message.objects.create(session=session, role="user", content="Again", status="answering")

    end_idle_sessions()

    assert Message.objects.get(pk=stuck.pk).status == "failed"
    assert Message.objects.get(pk=fresh.pk).status == "answering"
