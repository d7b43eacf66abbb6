"""The offline coach looking back: asked about an earlier conversation, it calls
search_conversations, then answers from what it found, in the person's own words.

Driven over real HTTP with the openai SDK, as the app drives it; the results it reads are
rendered by the app's own look_back_text, so the two cannot drift apart."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date
from typing import Any

import openai
import pytest

from coach.look_back import COACH, PERSON, Line, LookedBack, look_back_text
from offline_coach import ModelServer

SYSTEM = {"role": "system", "content": "# Coach\nToday: 2026-06-10 (Wednesday)"}
TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}
    for name in ("save_memory", "update_memory", "search_memories", "search_conversations")
]
KNEE = LookedBack(
    session_id=7,
    message_id=70,
    kind="exchange",
    conversation_date=date(2026, 5, 3),
    date=date(2026, 5, 3),
    title="My left knee clicks on the stairs",
    lines=(Line(PERSON, "My left knee clicks on the stairs"), Line(COACH, "Then we skip lunges for now.")),
    similarity=0.8,
)


@pytest.fixture(scope="module")
def running_server() -> Iterator[ModelServer]:
    with ModelServer(scripted=True) as server:
        yield server


@pytest.fixture
def client(running_server: ModelServer) -> openai.OpenAI:
    running_server.reset()
    return openai.OpenAI(base_url=running_server.base_url, api_key="offline", max_retries=0, timeout=5)


def answer(client: openai.OpenAI, *messages: dict[str, Any], tools: list[dict[str, Any]] = TOOLS) -> Any:
    completion = client.chat.completions.create(model="offline-coach", messages=[SYSTEM, *messages], tools=tools)
    return completion.choices[0].message


def said(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def looked_back(result: dict[str, Any]) -> list[dict[str, Any]]:
    call = {"id": "call_1", "type": "function", "function": {"name": "search_conversations", "arguments": "{}"}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps(result)},
    ]


@pytest.mark.parametrize(
    ("text", "query"),
    [
        ("Do you remember when I said my knee clicks on the stairs?", "my knee clicks on the stairs"),
        ("What did I say about my knee?", "my knee"),
        ("what did i tell you about the library talk", "the library talk"),
        ("Like I said last month, my knee clicks", "my knee clicks"),
        ("Do you remember what I told you about my sister?", "my sister"),
    ],
)
def test_asked_about_an_earlier_conversation_it_looks_back_for_what_was_asked(
    client: openai.OpenAI, text: str, query: str
) -> None:
    message = answer(client, said(text))

    (call,) = message.tool_calls
    assert call.function.name == "search_conversations"
    assert json.loads(call.function.arguments) == {"query": query, "limit": None}


def test_it_answers_from_what_it_found_quoting_the_persons_own_words_dated(client: openai.OpenAI) -> None:
    result = {"status": "found", "exchanges": 1, "text": look_back_text([KNEE])}

    message = answer(client, said("What did I say about my knee?"), *looked_back(result))

    assert not message.tool_calls
    assert 'On 3 May you told me: "My left knee clicks on the stairs"' in message.content
    # The coach's own line is never passed off as what the person said.
    assert "skip lunges" not in message.content


def test_with_nothing_found_it_says_it_does_not_have_it_rather_than_guess(client: openai.OpenAI) -> None:
    result = {"status": "found", "exchanges": 0, "text": look_back_text([])}

    message = answer(client, said("What did I say about my knee?"), *looked_back(result))

    assert "I don't have that from our earlier conversations" in message.content


def test_without_the_look_back_offered_it_searches_only_its_memories(client: openai.OpenAI) -> None:
    message = answer(client, said("What did I say about my knee?"), tools=TOOLS[:3])

    assert [call.function.name for call in message.tool_calls] == ["search_memories"]


def test_a_plain_statement_is_not_a_reason_to_look_back(client: openai.OpenAI) -> None:
    message = answer(client, said("I went for a swim today"))

    assert all(call.function.name != "search_conversations" for call in message.tool_calls or [])
