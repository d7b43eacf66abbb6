"""Shapes of stream and embeddings answer that some servers send and no fixture records,
read by the gateway over real HTTP from the scripted model server."""

from __future__ import annotations

import asyncio
import base64
import json
import struct

import pytest

from infra import llm
from infra.llm import LLMError, ModelResponse, TextDelta
from offline_coach import ModelServer

FIRST = '{"key":"morning-runs","summary":"Runs at 6am"}'
SECOND = '{"key":"marathon-goal","summary":"A marathon in October"}'


def chunk(delta: dict | None = None, finish: str | None = None, **extra: object) -> str:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return json.dumps({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": choices, **extra})


def call(
    index: int | None = None, id: str | None = None, name: str | None = None, arguments: str | None = None
) -> dict:
    part: dict = {"function": {}}
    if index is not None:
        part["index"] = index
    if id is not None:
        part["id"] = id
    if name is not None:
        part["function"]["name"] = name
    if arguments is not None:
        part["function"]["arguments"] = arguments
    return {"tool_calls": [part]}


def answer(model_server: ModelServer, events: list[str]) -> tuple[list[str], ModelResponse]:
    model_server.queue_raw_stream(events)

    async def read() -> tuple[list[str], ModelResponse]:
        pieces, response = [], None
        async for item in llm.stream_chat([{"role": "user", "content": "Hi"}]):
            if isinstance(item, TextDelta):
                pieces.append(item.text)
            else:
                response = item
        assert response is not None
        return pieces, response

    return asyncio.run(read())


def calls_of(response: ModelResponse) -> list[tuple[str, str, str]]:
    return [(c.id, c.name, c.arguments) for c in response.tool_calls]


def test_two_calls_interleaved_by_index_come_apart_whole(model_server: ModelServer) -> None:
    events = [
        chunk(call(0, "call_a", "save_memory", "")),
        chunk(call(1, "call_b", "save_memory", "")),
        *[
            chunk(call(index, arguments=piece))
            for pair in zip(FIRST[:20], SECOND[:20], strict=True)
            for index, piece in enumerate(pair)
        ],
        chunk(call(0, arguments=FIRST[20:])),
        chunk(call(1, arguments=SECOND[20:])),
        chunk({}, "tool_calls"),
        "[DONE]",
    ]

    _, response = answer(model_server, events)

    assert calls_of(response) == [("call_a", "save_memory", FIRST), ("call_b", "save_memory", SECOND)]


def test_calls_without_index_are_told_apart_by_id_even_when_interleaved(model_server: ModelServer) -> None:
    events = [
        chunk(call(id="call_a", name="save_memory", arguments=FIRST[:10])),
        chunk(call(id="call_b", name="save_memory", arguments=SECOND[:10])),
        chunk(call(id="call_a", arguments=FIRST[10:])),
        chunk(call(id="call_b", arguments=SECOND[10:])),
        chunk({}, "tool_calls"),
    ]

    _, response = answer(model_server, events)

    assert calls_of(response) == [("call_a", "save_memory", FIRST), ("call_b", "save_memory", SECOND)]


def test_every_call_numbered_zero_with_its_own_id_stays_separate(model_server: ModelServer) -> None:
    events = [
        chunk(call(0, "call_a", "save_memory", FIRST[:5])),
        chunk(call(0, arguments=FIRST[5:])),
        chunk(call(0, "call_b", "save_memory", SECOND[:5])),
        chunk(call(0, arguments=SECOND[5:])),
        chunk({}, "tool_calls"),
    ]

    _, response = answer(model_server, events)

    assert calls_of(response) == [("call_a", "save_memory", FIRST), ("call_b", "save_memory", SECOND)]


def test_pieces_with_neither_index_nor_id_continue_the_call_under_way(model_server: ModelServer) -> None:
    events = [
        chunk(call(name="save_memory", arguments=FIRST[:7])),
        chunk(call(arguments=FIRST[7:])),
        chunk({}, "tool_calls"),
    ]

    _, response = answer(model_server, events)

    # The server gave no id; the call gets one, so its result can be matched to it.
    assert calls_of(response) == [("call_0", "save_memory", FIRST)]


def test_arguments_sent_whole_and_repeated_on_the_finishing_chunk_are_taken_once(model_server: ModelServer) -> None:
    events = [
        chunk(call(0, "call_a", "save_memory", FIRST)),
        chunk({**call(0, "call_a", arguments=FIRST)}, "tool_calls"),
    ]

    _, response = answer(model_server, events)

    assert calls_of(response) == [("call_a", "save_memory", FIRST)]


def test_a_legacy_function_call_is_taken_as_a_tool_call(model_server: ModelServer) -> None:
    events = [
        chunk({"role": "assistant", "function_call": {"name": "save_memory", "arguments": FIRST[:9]}}),
        chunk({"function_call": {"arguments": FIRST[9:]}}),
        chunk({}, "function_call"),
    ]

    _, response = answer(model_server, events)

    assert calls_of(response) == [("call_0", "save_memory", FIRST)]
    assert response.finish_reason == "tool_calls"


def test_chunks_without_choices_before_and_after_the_words_are_passed_over(model_server: ModelServer) -> None:
    events = [
        json.dumps({"choices": [], "id": "", "prompt_filter_results": [{"prompt_index": 0}]}),
        chunk({"role": "assistant", "content": "Hello"}),
        json.dumps({"id": "chatcmpl-1", "choices": None}),
        chunk({"content": " there"}, "stop"),
        chunk(None, usage={"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14}),
        "[DONE]",
    ]

    pieces, response = answer(model_server, events)

    assert pieces == ["Hello", " there"]
    assert (response.text, response.finish_reason, response.tool_calls) == ("Hello there", "stop", ())


def test_a_response_with_nothing_to_add_is_whole_for_the_turn_to_judge(model_server: ModelServer) -> None:
    # After words that came with tool calls, a model's next round may rightly add nothing.
    pieces, response = answer(model_server, [chunk({"role": "assistant", "content": ""}), chunk({}, "stop"), "[DONE]"])

    assert pieces == [] and (response.text, response.tool_calls, response.finish_reason) == ("", (), "stop")


@pytest.mark.parametrize(
    ("events", "said"),
    [
        ([chunk(None, usage={"prompt_tokens": 1, "completion_tokens": 0}), "[DONE]"], "cut off"),
        ([chunk(call(0, "call_a", arguments=FIRST)), chunk({}, "tool_calls")], "without a name"),
        (['"just a string"', "[1, 2]", "[DONE]"], "cut off"),
    ],
    ids=["usage only", "call without a name", "not chunks at all"],
)
def test_an_unusable_stream_is_a_clear_error(model_server: ModelServer, events: list[str], said: str) -> None:
    with pytest.raises(LLMError, match=said):
        answer(model_server, events)


FLOATS = [0.5, -0.25, 0.125]


@pytest.mark.parametrize(
    "embedding",
    [FLOATS, base64.b64encode(struct.pack("<3f", *FLOATS)).decode()],
    ids=["float list", "base64"],
)
def test_an_embedding_is_decoded_from_floats_or_base64(model_server: ModelServer, settings, embedding: object) -> None:
    model_server.queue_embeddings_body(json.dumps({"object": "list", "data": [{"index": 0, "embedding": embedding}]}))

    [result] = llm.embed(["Runs at 6am"])

    assert (result.vector, result.model) == (FLOATS, settings.EMBEDDING_MODEL)


def test_embeddings_out_of_order_are_put_back_in_order(model_server: ModelServer) -> None:
    data = [{"index": 1, "embedding": [0.0, 1.0]}, {"index": 0, "embedding": [1.0, 0.0]}]
    model_server.queue_embeddings_body(json.dumps({"object": "list", "data": data}))

    assert [e.vector for e in llm.embed(["first", "second"])] == [[1.0, 0.0], [0.0, 1.0]]


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"object": "list", "data": []}, "asked for 1 embeddings, got 0"),
        ({"object": "list"}, "asked for 1 embeddings, got 0"),
        ({"object": "list", "data": [7]}, "neither a list of numbers"),
        ({"object": "list", "data": [{"index": 0, "embedding": "not base64!"}]}, "not base64"),
        ({"object": "list", "data": [{"index": 0, "embedding": "AAAA//8="}]}, "whole number of float32"),
        ({"object": "list", "data": [{"index": 0, "embedding": []}]}, "empty"),
        ({"object": "list", "data": [{"index": 0, "embedding": {"values": [1]}}]}, "neither a list of numbers"),
    ],
    ids=["no data", "no data field", "not an object", "bad base64", "torn float32", "empty vector", "wrong type"],
)
def test_an_unusable_embeddings_answer_is_a_clear_error(model_server: ModelServer, body: dict, said: str) -> None:
    model_server.queue_embeddings_body(json.dumps(body))

    with pytest.raises(LLMError, match=said):
        llm.embed(["Runs at 6am"])


@pytest.mark.parametrize(
    ("usage_chunk", "cached"),
    [
        # OpenAI, Azure and vLLM: in the usage's prompt_tokens_details.
        (
            chunk(
                None,
                usage={"prompt_tokens": 1204, "completion_tokens": 9, "prompt_tokens_details": {"cached_tokens": 1152}},
            ),
            1152,
        ),
        # llama.cpp's server: in the last chunk's timings, beside its usage.
        (
            chunk(
                {},
                "stop",
                usage={"prompt_tokens": 808, "completion_tokens": 9},
                timings={"cache_n": 800, "prompt_n": 8},
            ),
            800,
        ),
        # A server that says nothing of a cache.
        (chunk(None, usage={"prompt_tokens": 812, "completion_tokens": 9}), None),
    ],
    ids=["openai", "llama.cpp", "no cache"],
)
def test_the_prompt_tokens_a_server_read_from_its_cache_are_kept_as_it_says(
    model_server: ModelServer, usage_chunk: str, cached: int | None
) -> None:
    events = [chunk({"role": "assistant", "content": "Hello"}), chunk({}, "stop"), usage_chunk, "[DONE]"]

    _, response = answer(model_server, events)

    assert response.usage is not None and response.usage.cached_tokens == cached
