"""An embeddings server that hangs, or answers late, under a chat turn: the memory tool that
waits on it is answered within the embeddings' own deadline (EMBEDDING_TIMEOUT_SECONDS),
the model is told nothing was saved, the turn goes on and answers; and nothing a turn
started is written after the turn ended (memory.tool_context.ToolContext.writing)."""

from __future__ import annotations

import json
import logging
import threading
from functools import partial
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from accounts.models import User
from coach.claims import attempt_under_way, reply_fail, turn_claim
from coach.models import Message
from coach.services import message_post, session_start
from memory.drafts import MemoryDraft
from memory.embeddings import embed_memory
from memory.models import Memory, MemoryEvent
from memory.services import memory_save
from memory.tool_context import ToolContext, TurnEnded
from offline_coach import ModelServer
from tests.coach.embedding_servers import EmbeddingServer
from tests.coach.sse import events, session_cookie
from tests.coach.test_resumable_turn import app_env, post_message, reply_url
from tests.coach.test_turn import SHOULDER_SAVE as SHOULDER
from tests.emails.workers import wait_until
from tests.processes import app_process

pytestmark = pytest.mark.django_db(transaction=True)

REPLY = "I couldn't note that just now. Let's keep overhead pressing out of this week all the same."


@pytest.fixture
def cookie(user: User, client: Client) -> str:
    client.force_login(user)
    return session_cookie(client)


def tool_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool results a chat request carried back to the model, in order."""
    return [json.loads(message["content"]) for message in request["messages"] if message["role"] == "tool"]


def replies(message: Message) -> list[tuple[str, str]]:
    return list(Message.objects.filter(reply_to=message).values_list("status", "content"))


def test_a_save_whose_embeddings_server_hangs_is_told_to_the_model_and_the_turn_still_answers(
    cookie: str, user: User, model_server: ModelServer
) -> None:
    model_server.queue_tool_calls([("save_memory", SHOULDER)])
    # The model tries again, and searches: neither waits on the server a second time.
    model_server.queue_tool_calls(
        [("save_memory", SHOULDER), ("search_memories", {"query": "shoulder", "limit": None})]
    )
    model_server.queue_text(REPLY)

    with EmbeddingServer(delay_seconds=None) as hanging:
        env = app_env(model_server, EMBEDDING_BASE_URL=hanging.base_url, EMBEDDING_TIMEOUT_SECONDS="2")
        # A real web process, its turn deadline production's (120 s): had the embedding held
        # the turn until then, it would have failed "too slow" instead of answering.
        with app_process(env) as app:
            message = post_message(app.url, session_start(user=user), "I have a bad left shoulder", cookie=cookie)
            received = list(events(reply_url(app.url, message), cookie=cookie, timeout=100))

    assert received[-1][0] == "done"
    assert replies(message) == [("complete", REPLY)]
    _, second, third = model_server.chat_requests()
    [saved] = tool_results(second)
    assert saved["status"] == "not_saved"
    assert saved["reason"] == (
        "memory could not be reached just now (the embeddings did not come back within 2 s): "
        "nothing was saved or changed"
    )
    _, again, searched = tool_results(third)
    assert again["status"] == "not_saved" and "earlier in this turn, so it was not tried again" in again["reason"]
    assert searched["status"] == "unavailable" and "earlier in this turn" in searched["error"]
    # One request reached the server: the first save's; it gave up on it at the deadline.
    assert hanging.requests == 1 and hanging.given_up_on.is_set()
    assert not Memory.objects.filter(user=user).exists()


def test_a_save_whose_embedding_comes_back_after_its_turn_ended_writes_nothing(
    live_app: str, cookie: str, user: User, model_server: ModelServer, settings, caplog: pytest.LogCaptureFixture
) -> None:
    # The turn's deadline passes while the save waits on a slow (not hanging) server,
    # whose answer comes back within the embeddings' own deadline, after the turn failed.
    settings.COACH_TURN_DEADLINE_SECONDS = 2
    settings.EMBEDDING_TIMEOUT_SECONDS = 6
    model_server.queue_tool_calls([("save_memory", SHOULDER)])
    caplog.set_level(logging.INFO, logger="memory.tool_context")

    with EmbeddingServer(delay_seconds=4) as slow:
        settings.EMBEDDING_BASE_URL = slow.base_url
        message = post_message(live_app, session_start(user=user), "I have a bad left shoulder", cookie=cookie)
        received = list(events(reply_url(live_app, message), cookie=cookie))
        assert received[-1][0] == "failed"
        assert slow.answered.wait(timeout=30), "the slow server never answered"
        wait_until(
            lambda: any("after its turn ended" in record.getMessage() for record in caplog.records),
            "the save to come to its write, after the embedding came back",
        )

    assert Message.objects.get(pk=message.pk).status == "failed"
    assert not Memory.objects.filter(user=user).exists()
    assert not MemoryEvent.objects.filter(user=user).exists()


def test_a_turn_that_ends_while_a_save_is_written_waits_for_it_and_refuses_any_later_one(user: User) -> None:
    message = message_post(session=session_start(user=user), text="I have a bad left shoulder", client_id=None)
    attempt = turn_claim(message_id=message.pk, user_id=user.pk, now=timezone.now())
    assert attempt is not None
    context = ToolContext(user=user, turn_under_way=partial(attempt_under_way, attempt))
    inside, go_on = threading.Event(), threading.Event()

    def save_and_hold() -> None:
        try:
            embedded = embed_memory(summary="About left-shoulder", content="About left-shoulder")
            with context.writing():
                memory_save(user=user, draft=draft("left-shoulder"), source="coach", actor="coach", embedding=embedded)
                inside.set()
                go_on.wait(timeout=30)
        finally:
            connection.close()

    writer = threading.Thread(target=save_and_hold)
    writer.start()
    assert inside.wait(timeout=30)
    ended: list[bool] = []
    ending = threading.Thread(
        target=lambda: (ended.append(reply_fail(attempt=attempt, error="deadline")), connection.close())
    )
    ending.start()
    # The turn's end waits on the message row the write holds, until the write commits.
    wait_until(lambda: backends_waiting_on_a_lock() == 1, "the turn's end to wait for the write")
    go_on.set()
    writer.join(timeout=30)
    ending.join(timeout=30)

    assert ended == [True]
    assert Memory.objects.keyed(user.pk, "left-shoulder").exists(), "the write under way landed, before the end"
    embedded = embed_memory(summary="About left-knee", content="About left-knee")
    with pytest.raises(TurnEnded), context.writing():
        memory_save(user=user, draft=draft("left-knee"), source="coach", actor="coach", embedding=embedded)
    assert not Memory.objects.keyed(user.pk, "left-knee").exists()
    assert Message.objects.get(pk=message.pk).status == "failed"


def draft(key: str) -> MemoryDraft:
    return MemoryDraft(key=key, tier="profile", category="habit", summary=f"About {key}", content=f"About {key}")


def backends_waiting_on_a_lock() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        (waiting,) = cursor.fetchone()
    return waiting
