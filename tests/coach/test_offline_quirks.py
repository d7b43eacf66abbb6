"""The offline coach taking on the ways of real servers (offline_coach/quirks.py), over real
HTTP with the openai SDK: what the app and `check_model` are tried against."""

from __future__ import annotations

import openai
import pytest

from offline_coach import ModelServer
from offline_coach.quirks import (
    DROPS_SYSTEM_PROMPT,
    REFUSES_STREAMED_AUTO_TOOL_CHOICE,
    STREAMED_AUTO_TOOL_CHOICE_REFUSAL,
    TOOLS_ONLY_WHEN_FORCED,
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "save_memory",
            "parameters": {"type": "object", "properties": {"key": {"type": "string"}, "summary": {"type": "string"}}},
        },
    }
]
SAVE_WORTHY = [
    {"role": "system", "content": "# Coach\nToday: 2025-03-10 (Monday)"},
    {"role": "user", "content": "I'm allergic to peanuts."},
]


def _client(server: ModelServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="offline", max_retries=0, timeout=5)


def test_a_server_that_calls_tools_only_when_forced_answers_in_words_under_automatic_choice() -> None:
    with ModelServer(quirks=[TOOLS_ONLY_WHEN_FORCED]) as server:
        client = _client(server)
        automatic = client.chat.completions.create(model="m", messages=SAVE_WORTHY, tools=TOOLS, tool_choice="auto")
        forced = client.chat.completions.create(
            model="m",
            messages=SAVE_WORTHY,
            tools=TOOLS,
            tool_choice={"type": "function", "function": {"name": "save_memory"}},
        )

    assert not automatic.choices[0].message.tool_calls and automatic.choices[0].message.content
    assert [call.function.name for call in forced.choices[0].message.tool_calls] == ["save_memory"]


def test_a_server_that_refuses_streamed_automatic_tool_choice_answers_500_and_serves_it_unstreamed() -> None:
    with ModelServer(quirks=[REFUSES_STREAMED_AUTO_TOOL_CHOICE]) as server:
        client = _client(server)
        with pytest.raises(openai.InternalServerError) as refused:
            client.chat.completions.create(
                model="m", messages=SAVE_WORTHY, tools=TOOLS, tool_choice="auto", stream=True
            )
        whole = client.chat.completions.create(model="m", messages=SAVE_WORTHY, tools=TOOLS, tool_choice="auto")

    assert STREAMED_AUTO_TOOL_CHOICE_REFUSAL in str(refused.value)
    assert [call.function.name for call in whole.choices[0].message.tool_calls] == ["save_memory"]


def test_a_server_that_drops_the_system_prompt_counts_only_the_rest() -> None:
    long_system = {"role": "system", "content": "# Coach\n" + "Remember the person's injuries. " * 200}
    user = {"role": "user", "content": "hello"}
    with ModelServer() as plain, ModelServer(quirks=[DROPS_SYSTEM_PROMPT]) as dropping:
        told = _client(plain).chat.completions.create(model="m", messages=[long_system, user])
        dropped = _client(dropping).chat.completions.create(model="m", messages=[long_system, user])
        alone = _client(plain).chat.completions.create(model="m", messages=[user])

    assert told.usage.prompt_tokens > 1000
    assert dropped.usage.prompt_tokens == alone.usage.prompt_tokens < 10


def test_an_unknown_quirk_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown quirks \\['chatty'\\]"):
        ModelServer(quirks=["chatty"])
