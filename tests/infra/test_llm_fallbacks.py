"""The gateway adapts to a server that refuses part of a request: it sends it again without
that part at once, remembers the server's answer, and the person never sees the refusal."""

from __future__ import annotations

import logging

import pytest
from asgiref.sync import async_to_sync
from django.test import Client

from accounts.models import User
from coach.models import Message
from coach.services import session_start
from infra import llm
from memory.models import Memory
from offline_coach import ModelServer
from tests.coach.test_turn import SHOULDER_SAVE, ask, replies, stream, words_of

REFUSED_STRICT = "Invalid tools: 'strict' is not supported by this server."
REFUSED_MAX_TOKENS = (
    "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
)
REFUSED_PARALLEL = "Unrecognized request argument supplied: parallel_tool_calls"


@pytest.fixture
def person(live_app: str, user: User, client: Client) -> Client:
    client.force_login(user)
    return client


def answer(user: User, text: str) -> Message:
    from coach.turn import turn_run

    message = ask(session_start(user=user), text)
    async_to_sync(turn_run)(user_id=user.pk, message_id=message.pk)
    return message


def strict_flags(body: dict) -> list[object]:
    return [tool["function"].get("strict") for tool in body.get("tools") or []]


def test_the_memory_tools_are_offered_with_strict_schemas_and_parallel_calls(
    transactional_db: None, user: User, model_server: ModelServer
) -> None:
    model_server.queue_text("Noted.")

    answer(user, "Hello")

    body = model_server.chat_requests()[0]
    assert strict_flags(body) and all(flag is True for flag in strict_flags(body))
    assert body["parallel_tool_calls"] is True
    assert body["stream_options"] == {"include_usage": True}


def test_a_server_that_refuses_strict_gets_the_request_again_without_it_and_the_reply_is_whole(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    model_server.queue_error(400, REFUSED_STRICT)
    model_server.queue_text("Let's plan a gentle week around your shoulder.", chunk_delay_seconds=0.01)
    message = ask(session_start(user=user), "Plan my week")

    received = stream(live_app, person, message)

    first, second = model_server.chat_requests()
    assert all(flag is True for flag in strict_flags(first))
    assert strict_flags(second) == [None] * len(strict_flags(first))
    # The same tools otherwise, word for word.
    assert [tool["function"]["parameters"] for tool in second["tools"]] == [
        tool["function"]["parameters"] for tool in first["tools"]
    ]
    assert [name for name, _ in received if name in {"failed", "done"}] == ["done"]
    assert words_of(received) == "Let's plan a gentle week around your shoulder."
    assert replies(message) == [("complete", "Let's plan a gentle week around your shoulder.")]


def test_a_refused_strict_is_remembered_for_that_server_and_said_once_in_the_log(
    transactional_db: None, user: User, model_server: ModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    model_server.queue_error(400, REFUSED_STRICT)
    model_server.queue_text("First answer.")
    model_server.queue_text("Second answer.")

    with caplog.at_level(logging.WARNING, logger="infra.llm_fallbacks"):
        answer(user, "Hello")
        answer(user, "Hello again")

    requests = model_server.chat_requests()
    # Refused, sent again; then the next turn goes without strict from its first request.
    assert len(requests) == 3
    assert [any(strict_flags(body)) for body in requests] == [True, False, False]
    said = [record.getMessage() for record in caplog.records if record.name == "infra.llm_fallbacks"]
    assert len(said) == 1
    assert model_server.base_url in said[0] and "tool schemas are sent without strict" in said[0]
    assert [fallback.name for fallback in llm.fallbacks_in_use()] == ["no-strict"]


def test_what_one_server_refused_is_still_sent_to_another_server_and_to_another_model(
    transactional_db: None, user: User, model_server: ModelServer, settings
) -> None:
    model_server.queue_error(400, REFUSED_STRICT)
    model_server.queue_text("First answer.")
    answer(user, "Hello")
    assert [any(strict_flags(body)) for body in model_server.chat_requests()] == [True, False]

    with ModelServer(scripted=True) as other:
        settings.OPENAI_BASE_URL = other.base_url
        other.queue_text("From the other server.")
        answer(user, "Hello there")
        assert all(strict_flags(other.chat_requests()[0]))

    settings.OPENAI_BASE_URL = model_server.base_url
    settings.COACH_MODEL = "another-model"
    model_server.reset()
    model_server.queue_text("From another model.")
    answer(user, "Hello once more")
    assert all(strict_flags(model_server.chat_requests()[0]))


def test_a_server_that_refuses_max_tokens_gets_max_completion_tokens_from_then_on(
    transactional_db: None, user: User, model_server: ModelServer, settings
) -> None:
    settings.COACH_MAX_TOKENS = 321
    model_server.queue_error(400, REFUSED_MAX_TOKENS)
    model_server.queue_text("A whole reply.")

    message = answer(user, "Plan my week")
    summary = llm.complete([{"role": "user", "content": "Summarise: a whole reply."}])

    first, second, background = model_server.chat_requests()
    assert first["max_tokens"] == 321 and "max_completion_tokens" not in first
    assert second["max_completion_tokens"] == 321 and "max_tokens" not in second
    # Background jobs (summaries, emails) talk to the same server and use what was learned.
    assert background["max_completion_tokens"] == 321 and "max_tokens" not in background
    assert summary
    assert replies(message) == [("complete", "A whole reply.")]


def test_a_server_that_refuses_parallel_tool_calls_still_gets_the_memory_saved(
    transactional_db: None, user: User, model_server: ModelServer
) -> None:
    model_server.queue_error(400, REFUSED_PARALLEL)
    model_server.queue_tool_calls([("save_memory", SHOULDER_SAVE)])
    model_server.queue_text("We'll work around it.")

    message = answer(user, "I have a bad left shoulder, no overhead pressing")

    requests = model_server.chat_requests()
    assert requests[0]["parallel_tool_calls"] is True
    assert all("parallel_tool_calls" not in body for body in requests[1:])
    assert Memory.objects.filter(user=user, category="injury").count() == 1
    assert replies(message) == [("complete", "We'll work around it.")]


def test_a_refusal_that_names_nothing_the_app_sent_fails_the_turn_without_a_second_try(
    transactional_db: None, user: User, model_server: ModelServer
) -> None:
    model_server.queue_error(400, "The request was malformed.")

    message = answer(user, "Hello")

    assert len(model_server.chat_requests()) == 1
    message.refresh_from_db()
    assert message.status == "failed" and "400" in message.error
    assert llm.fallbacks_in_use() == []
