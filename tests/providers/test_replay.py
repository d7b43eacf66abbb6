"""Every provider's recorded streams and embeddings, replayed over real HTTP through a turn."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from accounts.models import User
from coach.models import Message
from coach.services import session_start
from memory.models import Memory, MemoryEvent
from offline_coach import ModelServer
from tests.coach.test_turn import ask, replies, stream, words_of
from tests.memory.factories import memory_named
from tests.providers.replay import PROVIDERS, REPLY, embeddings_body, meta, parallel_fixtures, stream_events
from tests.providers.test_stream_shapes import answer, calls_of

# Its server sends every tool-call piece twice in one chunk: as tool_calls and as the
# legacy function_call.
BOTH_DIALECTS = "llama_cpp_python"


@pytest.fixture
def person(live_app: str, user: User, client: Client) -> Client:
    client.force_login(user)
    return client


def stored(user: User) -> dict[str, tuple[str, str, str, str]]:
    return {m.key: (m.tier, m.category, m.summary, m.content) for m in Memory.objects.filter(user=user)}


def as_stored(arguments: str) -> tuple[str, tuple[str, str, str, str]]:
    save = json.loads(arguments)
    return save["key"], (save["tier"], save["category"], save["summary"], save["content"])


def test_every_provider_has_its_recorded_streams_and_their_sources() -> None:
    assert PROVIDERS == ["azure_openai", "llama_cpp", "llama_cpp_python", "lm_studio", "ollama", "openai", "vllm"]
    for provider in PROVIDERS:
        about = meta(provider)
        assert about["follows"] and all(source["page"] and source["version"] for source in about["follows"])
        wanted = {"chat_text.sse", "chat_one_call.sse", "embeddings.json"}
        # A server that never makes two calls in one response has no such stream to replay.
        if not about["stream"]["parallel"].startswith("never"):
            wanted.add("chat_two_calls.sse")
        assert wanted <= set(about["files"]), provider


def test_a_call_streamed_as_tool_calls_and_again_as_a_legacy_function_call_is_one_call(
    model_server: ModelServer,
) -> None:
    events = stream_events(BOTH_DIALECTS, "chat_one_call.sse")
    [arguments] = meta(BOTH_DIALECTS)["expected_arguments"]["chat_one_call.sse"]
    server_id = json.loads(events[1])["choices"][0]["delta"]["tool_calls"][0]["id"]

    _, response = answer(model_server, events)

    assert calls_of(response) == [(server_id, "save_memory", arguments)]
    assert response.finish_reason == "tool_calls"


def test_a_save_streamed_in_both_dialects_at_once_is_applied_and_counted_once(
    live_app: str, person: Client, user: User, model_server: ModelServer, settings
) -> None:
    # A write cap of one: the save's copy, counted as a second write, would be refused.
    settings.MEMORY_MAX_WRITES_PER_TURN = 1
    [arguments] = meta(BOTH_DIALECTS)["expected_arguments"]["chat_one_call.sse"]
    model_server.queue_raw_stream(stream_events(BOTH_DIALECTS, "chat_one_call.sse"))
    model_server.queue_raw_stream(stream_events(BOTH_DIALECTS, "chat_text.sse"))
    message = ask(session_start(user=user), "I'd much rather train outside")

    received = stream(live_app, person, message)

    sent_back = model_server.chat_requests()[1]["messages"]
    [assistant] = [m for m in sent_back if m["role"] == "assistant" and m.get("tool_calls")]
    assert [call["function"]["arguments"] for call in assistant["tool_calls"]] == [arguments]
    results = [json.loads(m["content"]) for m in sent_back if m["role"] == "tool"]
    assert [result["status"] for result in results] == ["saved"]
    key, fields = as_stored(arguments)
    assert stored(user) == {key: fields}
    assert list(MemoryEvent.objects.filter(user=user).values_list("action", flat=True)) == ["created"]
    assert [data["action"] for name, data in received if name == "memory"] == ["saved"]
    assert words_of(received) == REPLY
    assert replies(message) == [("complete", REPLY)]


@pytest.mark.parametrize(("provider", "fixture"), parallel_fixtures())
def test_two_parallel_saves_are_both_stored_with_their_arguments_reassembled_exactly(
    live_app: str, person: Client, user: User, model_server: ModelServer, provider: str, fixture: str
) -> None:
    expected = meta(provider)["expected_arguments"][fixture]
    model_server.queue_raw_stream(stream_events(provider, fixture))
    model_server.queue_raw_stream(stream_events(provider, "chat_text.sse"))
    message = ask(session_start(user=user), "I run at 6am by the lake, and I want to finish my first marathon")

    received = stream(live_app, person, message)

    # The model is told what it asked for, byte for byte, and the result of each call.
    sent_back = model_server.chat_requests()[1]["messages"]
    [assistant] = [m for m in sent_back if m["role"] == "assistant" and m.get("tool_calls")]
    assert [call["function"]["arguments"] for call in assistant["tool_calls"]] == expected
    assert [call["function"]["name"] for call in assistant["tool_calls"]] == ["save_memory", "save_memory"]
    ids = [call["id"] for call in assistant["tool_calls"]]
    assert len(set(ids)) == 2
    results = [m for m in sent_back if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == ids
    assert [json.loads(m["content"])["status"] for m in results] == ["saved", "saved"]
    # Both memories are kept, exactly as the model wrote them.
    assert stored(user) == dict(as_stored(arguments) for arguments in expected)
    # And the words stream to the reader, then are saved whole.
    assert sum(1 for name, _ in received if name == "text") >= 2
    assert words_of(received) == REPLY
    assert received[-1][0] == "done"
    assert replies(message) == [("complete", REPLY)]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_memory_saved_in_a_turn_gets_the_providers_vector_decoded_exactly(
    live_app: str, person: Client, user: User, model_server: ModelServer, provider: str
) -> None:
    about = meta(provider)
    [arguments] = about["expected_arguments"]["chat_one_call.sse"]
    model_server.queue_raw_stream(stream_events(provider, "chat_one_call.sse"))
    model_server.queue_raw_stream(stream_events(provider, "chat_text.sse"))
    model_server.queue_embeddings_body(embeddings_body(provider))
    message = ask(session_start(user=user), "I'd much rather train outside")

    received = stream(live_app, person, message)

    assert received[-1][0] == "done"
    key, fields = as_stored(arguments)
    assert stored(user) == {key: fields}
    memory = memory_named(user, key)
    # The fixture's values are exact in float32, so base64 and JSON floats decode alike.
    assert [float(value) for value in memory.embedding] == about["embedding_vector"]
    assert len(model_server.embedding_requests()) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_reply_in_words_only_streams_and_is_saved(
    live_app: str, person: Client, user: User, model_server: ModelServer, provider: str
) -> None:
    model_server.queue_raw_stream(stream_events(provider, "chat_text.sse"), chunk_delay_seconds=0.02)
    message = ask(session_start(user=user), "Plan my week")

    received = stream(live_app, person, message)

    assert [data["text"] for name, data in received if name == "text"] != [REPLY]
    assert words_of(received) == REPLY
    assert replies(message) == [("complete", REPLY)]
    assert Message.objects.get(pk=message.pk).status == "answered"
    assert not Memory.objects.filter(user=user).exists()
