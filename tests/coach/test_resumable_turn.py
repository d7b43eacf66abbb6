"""Replies that survive anything: the turn runs on the server from the moment the message
is posted, any web process serves any reader, and every turn ends answered, stopped, or
failed and retryable, whatever breaks. Over real HTTP, against real uvicorn processes."""

from __future__ import annotations

import os
import signal
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest
from django.db import OperationalError, connection
from django.test import Client

from accounts.models import User
from coach import claims, streams
from coach.models import ChatSession, Message
from coach.services import message_post, session_start
from coach.views.streams import GONE, TOO_MANY_STREAMS
from memory.models import Memory
from offline_coach import ModelServer, Pause
from tests.coach.factories import TALK_SAVE
from tests.coach.sse import Event, post_form, read_events, session_cookie
from tests.conftest import make_user
from tests.processes import app_process

pytestmark = pytest.mark.django_db(transaction=True)

LONG_REPLY = " ".join(f"word{n}" for n in range(60))


@pytest.fixture
def cookie(live_app: str, user: User, client: Client) -> str:
    client.force_login(user)
    return session_cookie(client)


def app_env(model_server: ModelServer, **extra: str) -> dict[str, str]:
    """What a separate web process needs to be this test's app: its database, its Redis,
    its model server; the secrets it inherits from the test process's environment."""
    url = urllib.parse.urlsplit(_database_url())
    test_database = url._replace(path="/" + connection.settings_dict["NAME"]).geturl()
    return {
        "DATABASE_URL": test_database,
        "DJANGO_DEBUG": "true",
        "OPENAI_BASE_URL": model_server.base_url,
        "OPENAI_API_KEY": "test-key",
        "COACH_MODEL": "offline-coach",
        "EMBEDDING_MODEL": "bag-of-words",
        "MEMORY_DEDUP_THRESHOLD": "0.8",
        "MEMORY_DEDUP_FAR_THRESHOLD": "0.95",
        "LLM_MAX_RETRIES": "0",
        **extra,
    }


def _database_url() -> str:
    return os.environ["DATABASE_URL"]


def reply_url(base: str, message: Message) -> str:
    return f"{base}/chat/{message.session_id}/messages/{message.pk}/reply"


def post_message(base: str, session: ChatSession, text: str, *, cookie: str) -> Message:
    status, body = post_form(
        f"{base}/chat/{session.pk}/messages", {"text": text, "client_id": str(uuid.uuid4())}, cookie=cookie
    )
    assert status == 200, body
    return Message.objects.filter(session=session, role="user").latest("pk")


def words(received: list[Event]) -> str:
    return "".join(event.data["text"] for event in received if event.name == "text")


def wait_for(condition, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.05)


def status_of(message: Message) -> str:
    return Message.objects.get(pk=message.pk).status


def replies(message: Message) -> list[tuple[str, str]]:
    return list(Message.objects.filter(reply_to=message).values_list("status", "content"))


def first_events(url: str, count: int, *, cookie: str) -> list[Event]:
    """Read `count` events, then hang up (a tab closed, a page reloaded)."""
    received = []
    for event in read_events(url, cookie=cookie):
        received.append(event)
        if len(received) == count:
            break
    return received


def events_until(url: str, text: str, *, cookie: str) -> list[Event]:
    """Read until the words so far hold `text` (however the pieces were grouped into
    events), then hang up."""
    received = []
    for event in read_events(url, cookie=cookie):
        received.append(event)
        if text in words(received):
            break
    return received


# Posted, the turn runs; any reader anywhere follows it -----------------------------------


def test_the_reply_is_written_and_saved_though_no_browser_ever_listens(
    live_app: str, cookie: str, user: User, model_server: ModelServer
) -> None:
    model_server.queue_text("Nobody watched, and still this was written.")
    session = session_start(user=user)

    message = post_message(live_app, session, "Plan my week", cookie=cookie)

    wait_for(lambda: status_of(message) == "answered")
    assert replies(message) == [("complete", "Nobody watched, and still this was written.")]


def test_a_reader_who_comes_back_gets_the_words_so_far_at_once_then_the_rest(
    live_app: str, cookie: str, user: User, model_server: ModelServer
) -> None:
    model_server.queue_text(LONG_REPLY, chunk_delay_seconds=0.05)
    message = post_message(live_app, session_start(user=user), "Plan my week", cookie=cookie)
    before = first_events(reply_url(live_app, message), 10, cookie=cookie)

    again = list(read_events(reply_url(live_app, message), cookie=cookie))

    assert words(again).startswith(words(before))
    assert words(again) == LONG_REPLY
    assert again[-1].name == "done"
    assert len(model_server.chat_requests()) == 1


def test_a_reconnect_with_last_event_id_gets_only_what_came_after(
    live_app: str, cookie: str, user: User, model_server: ModelServer
) -> None:
    model_server.queue_text(LONG_REPLY, chunk_delay_seconds=0.03)
    message = post_message(live_app, session_start(user=user), "Plan my week", cookie=cookie)
    before = first_events(reply_url(live_app, message), 6, cookie=cookie)

    rest = list(read_events(reply_url(live_app, message), cookie=cookie, last_event_id=before[-1].id))

    assert words(before) + words(rest) == LONG_REPLY
    assert all(event.id for event in before + rest)


def test_two_tabs_follow_one_reply_and_the_model_is_asked_once(
    live_app: str, cookie: str, user: User, model_server: ModelServer
) -> None:
    model_server.queue_text(LONG_REPLY, chunk_delay_seconds=0.02)
    message = post_message(live_app, session_start(user=user), "Plan my week", cookie=cookie)
    results: dict[str, list[Event]] = {}

    def tab(name: str) -> None:
        results[name] = list(read_events(reply_url(live_app, message), cookie=cookie))

    tabs = [threading.Thread(target=tab, args=(name,)) for name in ("first", "second")]
    for thread in tabs:
        thread.start()
    for thread in tabs:
        thread.join(timeout=30)

    assert words(results["first"]) == words(results["second"]) == LONG_REPLY
    assert len(model_server.chat_requests()) == 1
    assert replies(message) == [("complete", LONG_REPLY)]


def test_a_message_posted_in_one_tab_is_announced_to_the_others(
    live_app: str, cookie: str, user: User, model_server: ModelServer
) -> None:
    session = session_start(user=user)
    announced: list[Event] = []

    listening = threading.Event()

    def other_tab() -> None:
        url = f"{live_app}/chat/{session.pk}/events"
        for event in read_events(url, cookie=cookie, on_open=listening.set):
            announced.append(event)
            return

    listener = threading.Thread(target=other_tab)
    listener.start()
    # The tab reads from the moment its stream opened: what is posted after, it is told.
    assert listening.wait(timeout=15)
    message = post_message(live_app, session, "Plan my week", cookie=cookie)
    listener.join(timeout=15)

    assert [(event.name, event.data["message_id"]) for event in announced] == [("message", message.pk)]
    status, html = _get(live_app + announced[0].data["url"], cookie)
    assert status == 200 and f'id="exchange-{message.pk}"' in html and "Plan my week" in html


def test_a_reply_posted_to_one_web_process_streams_from_another(
    transactional_db: None, user: User, client: Client, model_server: ModelServer
) -> None:
    client.force_login(user)
    cookie = session_cookie(client)
    session = session_start(user=user)
    model_server.queue_text(LONG_REPLY, chunk_delay_seconds=0.03)

    with app_process(app_env(model_server)) as one, app_process(app_env(model_server)) as two:
        message = post_message(one.url, session, "Plan my week", cookie=cookie)
        received = list(read_events(reply_url(two.url, message), cookie=cookie))

    assert words(received) == LONG_REPLY
    assert received[-1].name == "done"
    assert len(model_server.chat_requests()) == 1
    assert replies(message) == [("complete", LONG_REPLY)]


# Every turn ends ------------------------------------------------------------------------


def test_a_web_process_killed_mid_reply_is_failed_by_the_one_started_after_it_keeping_its_words(
    transactional_db: None, user: User, client: Client, model_server: ModelServer
) -> None:
    client.force_login(user)
    cookie = session_cookie(client)
    session = session_start(user=user)
    # Held after its first words, so the process dies mid-reply however slow the machine.
    model_server.queue_text(LONG_REPLY, pause=Pause(after_chunks=6))

    with app_process(app_env(model_server)) as doomed:
        message = post_message(doomed.url, session, "Plan my week", cookie=cookie)
        seen = events_until(reply_url(doomed.url, message), "word4", cookie=cookie)
        doomed.process.send_signal(signal.SIGKILL)
        doomed.process.wait(timeout=10)

    assert status_of(message) == "answering"
    model_server.queue_text("Here is your week, whole.")
    # Heartbeats are not what ends it here: its successor knows the process is gone.
    with app_process(app_env(model_server, COACH_TURN_SILENT_SECONDS="600")) as restarted:
        up = time.monotonic()
        replayed = list(read_events(reply_url(restarted.url, message), cookie=cookie))
        failed_within = time.monotonic() - up
        assert replayed[-1].name == "failed" and replayed[-1].data["retry_url"]
        [(kind, kept)] = replies(message)
        status, _ = post_form(restarted.url + replayed[-1].data["retry_url"], {}, cookie=cookie)
        assert status == 200
        answered = list(read_events(reply_url(restarted.url, message), cookie=cookie))

    assert failed_within < 15
    assert words(replayed).startswith(words(seen)) and kind == "interrupted" and kept == words(replayed)
    assert answered[-1].name == "done" and words(answered) == "Here is your week, whole."
    assert replies(message) == [("complete", "Here is your week, whole.")]
    assert Message.objects.filter(session=session, role="user").count() == 1
    assert len(model_server.chat_requests()) == 2


def test_a_frozen_web_process_loses_its_turn_to_the_heartbeat_and_its_late_steps_change_nothing(
    transactional_db: None, user: User, client: Client, model_server: ModelServer
) -> None:
    client.force_login(user)
    cookie = session_cookie(client)
    session = session_start(user=user)
    model_server.queue_text(LONG_REPLY, chunk_delay_seconds=0.1)
    model_server.queue_text("Here is your week, whole.")
    # Quick beats and a short silence, so the test waits seconds, not the production eight.
    quick = {
        "COACH_TURN_HEARTBEAT_SECONDS": "0.3",
        "COACH_TURN_SILENT_SECONDS": "1.5",
        "COACH_TURN_SWEEP_SECONDS": "0.3",
    }

    with app_process(app_env(model_server, **quick)) as frozen, app_process(app_env(model_server, **quick)) as other:
        message = post_message(frozen.url, session, "Plan my week", cookie=cookie)
        seen: list[Event] = []
        stopped_at = 0.0
        # Followed on the other process: the frozen one's pid lives on, so only its
        # silence can tell the other that its turn is dead.
        for event in read_events(reply_url(other.url, message), cookie=cookie):
            seen.append(event)
            if len(seen) == 3:
                os.kill(frozen.process.pid, signal.SIGSTOP)
                stopped_at = time.monotonic()
        failed_after = time.monotonic() - stopped_at
        try:
            assert seen[-1].name == "failed" and status_of(message) == "failed"
            [(kind, kept)] = replies(message)
            status, _ = post_form(other.url + seen[-1].data["retry_url"], {}, cookie=cookie)
            assert status == 200
        finally:
            # Woken, the frozen process's attempt finds the message held by the retry.
            os.kill(frozen.process.pid, signal.SIGCONT)
        answered = list(read_events(reply_url(other.url, message), cookie=cookie))
    # Both processes have stopped: the frozen one only once its attempt had ended (a web
    # process waits for the turns it runs before it exits).

    assert failed_after < 15
    assert kind == "interrupted" and kept == words(seen)
    assert answered[-1].name == "done" and words(answered) == "Here is your week, whole."
    assert replies(message) == [("complete", "Here is your week, whole.")]
    assert status_of(message) == "answered"


def test_stop_ends_the_stream_even_when_the_database_refuses_to_record_it(
    live_app: str, cookie: str, user: User, model_server: ModelServer, monkeypatch
) -> None:
    def refused(**kwargs: object) -> bool:
        raise OperationalError("the database went away")

    monkeypatch.setattr("coach.turn.reply_stop", refused)
    monkeypatch.setattr("coach.turn_life.FINISH_RETRY_PAUSES_SECONDS", (0.01, 0.01))
    model_server.queue_text(LONG_REPLY, chunk_delay_seconds=0.05)
    message = post_message(live_app, session_start(user=user), "Plan my week", cookie=cookie)
    received: list[Event] = []
    for event in read_events(reply_url(live_app, message), cookie=cookie):
        received.append(event)
        if len(received) == 3:
            status, _ = post_form(f"{live_app}/chat/{message.session_id}/messages/{message.pk}/stop", {}, cookie=cookie)
            assert status == 204

    assert received[-1].name == "stopped"
    # Its heartbeat ended with it: the sweep gives the message its definite state.
    wait_for(lambda: claims.turns_sweep(silent_seconds=0) == 1 or status_of(message) == "failed")
    assert status_of(message) == "failed"
    [(kind, kept)] = replies(message)
    assert kind == "interrupted" and kept == words(received)


def test_a_reader_of_a_reply_whose_account_was_erased_meanwhile_is_told_and_its_stream_ends(
    live_app: str, cookie: str, user: User, model_server: ModelServer
) -> None:
    from accounts.forgetting import account_delete

    model_server.queue_text(LONG_REPLY, chunk_delay_seconds=0.1)
    message = post_message(live_app, session_start(user=user), "Plan my week", cookie=cookie)
    received: list[Event] = []
    for event in read_events(reply_url(live_app, message), cookie=cookie):
        received.append(event)
        if len(received) == 2:
            account_delete(user=user)

    assert received[-1].name == "failed"
    assert received[-1].data["message"] == GONE and "retry_url" not in received[-1].data
    assert not Message.objects.filter(pk=message.pk).exists()


def test_a_database_error_saving_the_reply_ends_the_stream_failed(
    live_app: str, cookie: str, user: User, model_server: ModelServer, monkeypatch
) -> None:
    def broken(**kwargs: object) -> None:
        raise OperationalError("the database went away")

    monkeypatch.setattr("coach.turn.reply_save", broken)
    monkeypatch.setattr("coach.turn_life.FINISH_RETRY_PAUSES_SECONDS", (0.01, 0.01))
    model_server.queue_text("A reply that cannot be saved.")
    message = message_post(session=session_start(user=user), text="Plan my week", client_id=None)

    received = list(read_events(reply_url(live_app, message), cookie=cookie))

    assert received[-1].name == "failed" and received[-1].data["retry_url"]
    assert status_of(message) == "failed"
    assert replies(message) == [("interrupted", "A reply that cannot be saved.")]


def test_a_turn_whose_context_cannot_be_assembled_leaves_no_claim_standing(
    live_app: str, cookie: str, user: User, model_server: ModelServer, monkeypatch
) -> None:
    def broken(**kwargs: object) -> None:
        raise OperationalError("the memory table is locked")

    monkeypatch.setattr(claims, "conversation_for_turn", broken)
    message = message_post(session=session_start(user=user), text="Plan my week", client_id=None)

    received = list(read_events(reply_url(live_app, message), cookie=cookie))

    assert received[-1].name == "failed"
    assert status_of(message) == "failed"
    assert Message.objects.get(pk=message.pk).claimed_at is None
    assert model_server.chat_requests() == []


def test_stop_ends_the_reply_keeping_what_was_written(
    live_app: str, cookie: str, user: User, model_server: ModelServer
) -> None:
    model_server.queue_text(LONG_REPLY, chunk_delay_seconds=0.05)
    message = post_message(live_app, session_start(user=user), "Plan my week", cookie=cookie)
    received: list[Event] = []
    for event in read_events(reply_url(live_app, message), cookie=cookie):
        received.append(event)
        if len(received) == 5:
            status, _ = post_form(f"{live_app}/chat/{message.session_id}/messages/{message.pk}/stop", {}, cookie=cookie)
            assert status == 204

    assert received[-1].name == "stopped"
    [(kind, kept)] = replies(message)
    assert kind == "stopped"
    assert kept == words(received).strip() and LONG_REPLY.startswith(kept) and kept != LONG_REPLY
    assert status_of(message) == "answered"


def test_a_memory_saved_in_the_turn_is_a_quiet_cue_with_view_and_undo(
    live_app: str, cookie: str, user: User, model_server: ModelServer
) -> None:
    model_server.queue_tool_calls([("save_memory", TALK_SAVE)])
    model_server.queue_text("Good luck with the talk.")
    message = post_message(live_app, session_start(user=user), "I'm giving a talk in June", cookie=cookie)

    received = list(read_events(reply_url(live_app, message), cookie=cookie))

    memory = Memory.objects.get(user=user)
    cues = [event.data for event in received if event.name == "memory"]
    assert cues == [
        {
            "action": "saved",
            "memory_id": memory.pk,
            "summary": "Giving a talk in June",
            "view_url": f"/memories/{memory.pk}/",
            "undo_url": f"/memories/{memory.pk}/delete",
        }
    ]
    assert words(received) == "Good luck with the talk."


def test_a_page_loaded_after_the_reply_shows_the_cue_of_the_memory_it_saved_and_only_then(
    live_app: str, cookie: str, user: User, model_server: ModelServer
) -> None:
    model_server.queue_tool_calls([("save_memory", TALK_SAVE)])
    writing = Pause(after_chunks=1)
    model_server.queue_text("Good luck with the talk.", pause=writing)
    message = post_message(live_app, session_start(user=user), "I'm giving a talk in June", cookie=cookie)
    page_url = f"{live_app}/chat/{message.session_id}/"
    wait_for(lambda: Memory.objects.filter(user=user).exists())

    # Mid-reply the page follows the reply's stream, which replays the cue: none in the page.
    mid_reply = page(page_url, cookie=cookie)
    assert status_of(message) == "answering", "the page was loaded before the reply was done"
    assert "data-stream-url" in mid_reply and 'class="memory-cue"' not in mid_reply
    writing.release.set()
    list(read_events(reply_url(live_app, message), cookie=cookie))

    memory = Memory.objects.get(user=user)
    after = page(page_url, cookie=cookie)
    view = f'<a href="/memories/{memory.pk}/">View</a>'
    assert after.count('class="memory-cue"') == 1
    undo = f'<button type="submit" class="link" form="undo-memory-{memory.pk}">Undo</button>'
    assert f'<p class="memory-cue">Saved to memory: Giving a talk in June · {view} · {undo}</p>' in after


def page(url: str, *, cookie: str) -> str:
    request = urllib.request.Request(url, headers={"Cookie": cookie})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read().decode()


# Limits ----------------------------------------------------------------------------------


def test_past_the_open_streams_limit_a_reader_is_refused_with_its_message(
    live_app: str, cookie: str, user: User, model_server: ModelServer, settings
) -> None:
    settings.COACH_MAX_OPEN_STREAMS = 2
    # A reply held mid-way until the test is done: a reply that ended would close its
    # readers' streams and free their places before the third reader came.
    writing = Pause(after_chunks=1)
    model_server.queue_text(LONG_REPLY, pause=writing)
    message = post_message(live_app, session_start(user=user), "Plan my week", cookie=cookie)
    held = [_open(reply_url(live_app, message), cookie) for _ in range(2)]

    with pytest.raises(urllib.error.HTTPError) as refused:
        _open(reply_url(live_app, message), cookie)

    assert refused.value.code == 429
    assert refused.value.read().decode() == TOO_MANY_STREAMS
    for response in held:
        response.close()
    assert writing.reached.wait(timeout=60), "the model was never asked"
    writing.release.set()
    assert len(model_server.chat_requests()) == 1
    # The person stops the long reply, so the test ends with it rather than waiting it out.
    streams.stop_request(message.pk)


def test_a_pool_of_two_connections_serves_ten_turns_whose_embeddings_take_a_second(
    transactional_db: None, client: Client
) -> None:
    """Every turn saves a memory, and the embedding model takes a second to answer each
    call: no database connection may wait on it. A step that cannot get a connection
    within a second fails, so one held through an embedding call fails the turns behind it."""
    people = [make_user(f"runner{n}@example.com") for n in range(10)]
    injuries = ["left knee", "right ankle", "lower back", "left wrist", "right shoulder"] * 2
    with ModelServer(embedding_delay_seconds=1.0) as slow_embeddings:
        env = app_env(slow_embeddings, DATABASE_POOL_MAX_SIZE="2", DATABASE_POOL_TIMEOUT_SECONDS="1")
        with app_process(env) as app:
            messages = []
            for person, injury in zip(people, injuries, strict=True):
                client.force_login(person)
                session = session_start(user=person)
                text = f"I hurt my {injury} running last week, so go easy on it."
                messages.append(post_message(app.url, session, text, cookie=session_cookie(client)))
            wait_for(lambda: all(status_of(m) != "answering" and status_of(m) != "pending" for m in messages), 90)

    assert [status_of(m) for m in messages] == ["answered"] * 10
    assert all(Memory.objects.filter(user=person, category="injury").exists() for person in people)


def _open(url: str, cookie: str):
    request = urllib.request.Request(url, headers={"Cookie": cookie, "Accept": "text/event-stream"})
    response = urllib.request.urlopen(request, timeout=10)
    response.readline()  # the stream has begun: this reader counts as open
    return response


def _get(url: str, cookie: str) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Cookie": cookie})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, response.read().decode()
