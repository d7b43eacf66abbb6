"""Degrade, never break: each service the app stands on stopped, frozen or killed under
it, one at a time, against real PostgreSQL, Redis and SMTP servers."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from accounts.forgetting import account_delete, memory_delete_by_person
from accounts.models import User
from coach.models import ChatSession, Message
from coach.services import message_post, session_start
from coach.tasks import summarise_ended_sessions
from coach.wiring.localservices import LocalService, start_postgres, start_redis
from emails.models import OutgoingMail
from emails.outbox import mail_send_due
from memory.models import Memory
from offline_coach import ModelServer, Pause
from tests.coach.factories import make_session
from tests.coach.sse import read_events, session_cookie
from tests.conftest import PASSWORD
from tests.emails.smtp_sink import SmtpSink
from tests.memory.factories import make_memory
from tests.processes import app_process, get_json

LONG_REPLY = " ".join(f"word{n}" for n in range(80))


@pytest.fixture
def own_redis(tmp_path: Path, settings) -> Iterator[LocalService]:
    """A Redis of this test's own, the app's cache and streams pointed at it, to kill."""
    redis = start_redis(tmp_path / "redis", throwaway=True)
    settings.REDIS_URL = redis.url
    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": redis.url}}
    yield redis
    redis.stop()


def kill(service: LocalService) -> None:
    """SIGKILL: no goodbye, no saving."""
    os.kill(service.pid(), signal.SIGKILL)
    deadline = timezone.now() + timedelta(seconds=10)
    while service.alive():
        assert timezone.now() < deadline, f"{service.name} did not die"


# Redis -------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_session_ended_while_redis_is_dead_is_summarised_once_it_is_back(
    user: User, client: Client, model_server: ModelServer, own_redis: LocalService, celery_eager: None
) -> None:
    session = make_session(user, "I ran 5 km today", "Great work.")
    client.force_login(user)
    kill(own_redis)

    response = client.post(f"/chat/{session.pk}/end")

    assert response.status_code == 302
    assert ChatSession.objects.get(pk=session.pk).ended_at is not None
    own_redis.restart()
    # Two ticks of the drain (and a task delivered twice) still summarise it once.
    assert summarise_ended_sessions() == 1
    assert summarise_ended_sessions() == 0
    ended = ChatSession.objects.get(pk=session.pk)
    assert ended.summary and ended.summarised_at is not None
    assert len(model_server.chat_requests()) == 1


@pytest.mark.django_db
def test_signing_in_works_without_redis_and_stays_rate_limited_in_the_process(
    user: User, own_redis: LocalService, caplog: pytest.LogCaptureFixture
) -> None:
    kill(own_redis)

    with caplog.at_level(logging.WARNING, logger="infra.cache_backend"):
        signed_in = Client()
        response = signed_in.post("/accounts/login/", {"login": user.email, "password": PASSWORD})
        guesser = Client()
        for _ in range(5):
            assert guesser.post("/accounts/login/", {"login": user.email, "password": "wrong"}).status_code == 200
        blocked = guesser.post("/accounts/login/", {"login": user.email, "password": PASSWORD})

    assert response.status_code == 302 and "_auth_user_id" in signed_in.session
    assert b"Too many failed login attempts" in blocked.content
    assert "_auth_user_id" not in guesser.session
    assert any("Redis does not answer" in record.getMessage() for record in caplog.records)


@pytest.mark.django_db
def test_sending_a_message_without_redis_is_still_limited_and_answered(
    user: User, client: Client, own_redis: LocalService, settings
) -> None:
    settings.COACH_MAX_TURNS_AT_ONCE = 100
    session = make_session(user)
    client.force_login(user)
    kill(own_redis)

    statuses = [
        client.post(
            f"/chat/{session.pk}/messages", {"text": f"Message {n}"}, headers={"HX-Request": "true"}
        ).status_code
        for n in range(11)
    ]

    assert statuses == [200] * 10 + [429]
    assert Message.objects.filter(session=session).count() == 10


@pytest.mark.django_db
def test_a_memory_and_an_account_are_deleted_while_redis_is_dead_saying_what_is_left_to_expire(
    user: User, own_redis: LocalService, caplog: pytest.LogCaptureFixture
) -> None:
    session = make_session(user, "I ran 5 km today", "Great work.")
    session.messages.filter(role="user").update(claimed_at=timezone.now())
    memory = make_memory(user, "runs", summary="Ran 5 km")
    kill(own_redis)

    with caplog.at_level(logging.WARNING, logger="accounts.forgetting"):
        memory_delete_by_person(user=user, memory_id=memory.pk)
        assert not Memory.objects.filter(pk=memory.pk).exists()
        account_delete(user=user, hosts=["testserver"])

    assert not User.objects.filter(pk=user.pk).exists() and not ChatSession.objects.exists()
    warnings = [record.getMessage() for record in caplog.records if record.name == "accounts.forgetting"]
    assert any(warning.startswith("memory cues could not be taken out of reply streams") for warning in warnings)
    assert any(warning.startswith("reply streams of an erased account could not be deleted") for warning in warnings)
    assert any(warning.startswith("rate-limit counters of an erased account") for warning in warnings)


@pytest.mark.django_db(transaction=True)
def test_without_redis_the_reply_is_still_written_and_shown_whole(
    live_app: str, user: User, client: Client, model_server: ModelServer, own_redis: LocalService
) -> None:
    client.force_login(user)
    model_server.queue_text("Written without a stream, and shown whole.")
    message = message_post(session=session_start(user=user), text="Plan my week", client_id=None)
    kill(own_redis)

    url = f"{live_app}/chat/{message.session_id}/messages/{message.pk}/reply"
    received = list(read_events(url, cookie=session_cookie(client)))

    assert [(event.name, event.data["html"]) for event in received] == [
        ("done", "<p>Written without a stream, and shown whole.</p>")
    ]
    assert Message.objects.get(pk=message.pk).status == "answered"


# SMTP --------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_signing_up_while_smtp_is_down_answers_normally_and_the_mail_arrives_once_it_is_back(
    smtp_sink: SmtpSink, settings
) -> None:
    smtp_sink.stop()
    form = {"email": "new@example.com", "password1": PASSWORD, "password2": PASSWORD}

    response = Client().post("/accounts/signup/", form, follow=True)

    assert response.status_code == 200
    assert b"sending a confirmation email to new@example.com" in response.content
    assert mail_send_due() == 0
    [waiting] = OutgoingMail.objects.all()
    assert (waiting.status, waiting.attempts) == ("queued", 1)
    assert "Connection refused" in waiting.error

    back = SmtpSink(port=smtp_sink.port).start()
    try:
        assert mail_send_due() == 0, "not before its pause is over"
        later = timezone.now() + timedelta(minutes=1)
        assert mail_send_due(now=later) == 1
        assert mail_send_due(now=later + timedelta(minutes=5)) == 0
        [message] = back.messages
    finally:
        back.stop()
    assert message["To"] == "new@example.com"
    assert "/accounts/confirm-email/" in message.get_body(("plain",)).get_content()
    assert not OutgoingMail.objects.exists()
    assert mail.outbox == []


@pytest.mark.django_db
def test_a_mail_smtp_refuses_for_good_is_recorded_failed_without_its_text(smtp_sink: SmtpSink) -> None:
    smtp_sink.answer_next("550 5.1.1 No such user here")
    Client().post("/accounts/signup/", {"email": "nobody@example.com", "password1": PASSWORD, "password2": PASSWORD})

    assert mail_send_due() == 0

    [failed] = OutgoingMail.objects.all()
    assert failed.status == "failed" and "550" in failed.error
    assert (failed.subject, failed.body_text, failed.body_html) == ("", "", "")


# PostgreSQL --------------------------------------------------------------------------------


@contextmanager
def frozen(database_dir: Path) -> Iterator[None]:
    """Every process of the PostgreSQL in `database_dir` stopped (SIGSTOP), then resumed."""
    postmaster = int((database_dir / "postmaster.pid").read_text().split()[0])
    pids = [postmaster, *_children(postmaster)]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


def test_healthz_says_503_within_two_seconds_while_postgres_is_frozen(tmp_path: Path) -> None:
    database = start_postgres(tmp_path / "postgres", throwaway=True)
    try:
        with app_process({"DATABASE_URL": database.url}) as app:
            assert get_json(app.url + "/healthz") == (200, {"status": "ok"})

            with frozen(tmp_path / "postgres"):
                # The client gives up after 2 s: an answer at all is an answer in time.
                status, body = get_json(app.url + "/healthz", timeout=2)
                alive = get_json(app.url + "/livez", timeout=2)

            assert status == 503
            assert body["failing"] == {"database": "no answer within 1.5 s"}
            assert alive == (200, {"status": "alive"})
            assert get_json(app.url + "/healthz", timeout=10) == (200, {"status": "ok"})
    finally:
        database.stop()


# A slow model ------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_model_that_streams_forever_is_cut_off_at_the_turn_deadline_and_retryable(
    live_app: str, user: User, client: Client, model_server: ModelServer, settings
) -> None:
    settings.COACH_TURN_DEADLINE_SECONDS = 2
    client.force_login(user)
    model_server.queue_text(LONG_REPLY * 50, chunk_delay_seconds=0.05)
    message = message_post(session=session_start(user=user), text="Plan my week", client_id=None)

    url = f"{live_app}/chat/{message.session_id}/messages/{message.pk}/reply"
    received = list(read_events(url, cookie=session_cookie(client)))

    assert received[-1].name == "failed"
    assert received[-1].data["message"].startswith("Your coach took too long to answer")
    assert received[-1].data["retry_url"]
    stored = Message.objects.get(pk=message.pk)
    assert (stored.status, stored.error) == ("failed", "the turn passed its deadline")
    [(kind, kept)] = Message.objects.filter(reply_to=message).values_list("status", "content")
    assert kind == "interrupted" and kept.startswith("word0 word1")


@pytest.mark.django_db(transaction=True)
def test_a_model_slow_to_start_is_given_up_on_after_the_first_words_deadline(
    live_app: str, user: User, client: Client, model_server: ModelServer, settings
) -> None:
    settings.COACH_FIRST_WORDS_SECONDS = 1
    client.force_login(user)
    model_server.queue_text("Too late.", delay_seconds=4)
    message = message_post(session=session_start(user=user), text="Plan my week", client_id=None)

    url = f"{live_app}/chat/{message.session_id}/messages/{message.pk}/reply"
    received = list(read_events(url, cookie=session_cookie(client)))

    assert received[-1].name == "failed"
    stored = Message.objects.get(pk=message.pk)
    assert (stored.status, stored.error) == ("failed", "the model did not start answering within 1 s")
    # One try, and no retry behind the person's back: the Retry is theirs.
    assert len(model_server.chat_requests()) == 1


# Stopping --------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_stopping_a_web_process_mid_reply_saves_the_reply_whole_first(
    user: User, client: Client, model_server: ModelServer
) -> None:
    from tests.coach.test_resumable_turn import app_env, post_message, reply_url, status_of

    client.force_login(user)
    cookie = session_cookie(client)
    session = session_start(user=user)
    # Held after its first words until the signal is sent: mid-reply however slow the machine.
    writing = Pause(after_chunks=2)
    model_server.queue_text(LONG_REPLY, pause=writing)

    with app_process(app_env(model_server)) as web:
        message = post_message(web.url, session, "Plan my week", cookie=cookie)
        first = next(iter(read_events(reply_url(web.url, message), cookie=cookie)))
        assert first.name == "text"
        # What the run command sends on Ctrl-C, and what a container runtime sends on stop.
        web.process.send_signal(signal.SIGTERM)
        writing.release.set()
        # uvicorn stops gently, then ends by the signal it was sent.
        assert web.process.wait(timeout=60) in (0, -signal.SIGTERM)

    assert status_of(message) == "answered"
    assert list(Message.objects.filter(reply_to=message).values_list("status", "content")) == [("complete", LONG_REPLY)]


def test_healthz_refuses_a_slow_answer_from_redis_too(tmp_path: Path) -> None:
    redis = start_redis(tmp_path / "redis", throwaway=True)
    try:
        with app_process({"REDIS_URL": redis.url}) as app:
            pid = redis.pid()
            os.kill(pid, signal.SIGSTOP)
            try:
                status, body = get_json(app.url + "/healthz", timeout=2)
            finally:
                os.kill(pid, signal.SIGCONT)
    finally:
        redis.stop()

    assert status == 503
    assert body["failing"] == {"redis": "no answer within 1.5 s"}
