"""`manage.py check_model` says, in under a minute, whether memory can work with the model
server the app is pointed at, and what it supports."""

from __future__ import annotations

import time
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from offline_coach import ModelServer
from offline_coach.quirks import DROPS_SYSTEM_PROMPT, TOOLS_ONLY_WHEN_FORCED
from tests.providers.replay import stream_events

SHOULDER = {"key": "left-shoulder", "summary": "Bad left shoulder"}


def check_model() -> str:
    out = StringIO()
    call_command("check_model", stdout=out)
    return out.getvalue()


# No database fixture: pytest-django refuses any query, so these also prove the command
# never opens a connection.
def test_the_offline_coach_passes_and_its_capabilities_are_printed(model_server: ModelServer) -> None:
    started = time.monotonic()

    printed = check_model()

    assert time.monotonic() - started < 60
    assert f"Model server: {model_server.base_url}" in printed
    assert "ok    chat streaming: the reply came in" in printed and "with token usage" in printed
    assert "ok    system prompt: " in printed and "prompt tokens counted for a prompt of about" in printed
    assert "ok    tool calling: a forced save_memory call, with JSON arguments" in printed
    assert "ok    tools left to choose: 2 calls in one response (parallel)" in printed
    assert "ok    each call once: no tool call came twice" in printed
    assert "ok    prompt cache: a repeated prompt: " in printed and "tokens read from the server's cache" in printed
    assert "ok    embeddings: 2 vectors of" in printed
    assert "Fallbacks the app will use with this server: none" in printed
    assert "Token usage: counted by the server" in printed
    assert printed.rstrip().endswith("Memory will work with this server.")
    forced = model_server.chat_requests()[1]
    assert forced["tool_choice"] == {"type": "function", "function": {"name": "save_memory"}}
    assert [body["input"] for body in model_server.embedding_requests()] == [
        ["I have a bad left shoulder.", "I'm giving a talk in June."]
    ]


def test_a_server_that_never_calls_tools_fails_saying_memory_will_not_work(model_server: ModelServer) -> None:
    for _ in range(3):
        model_server.queue_text("I'm only ever going to answer in words.")
    out = StringIO()

    with pytest.raises(CommandError) as failure:
        call_command("check_model", stdout=out)

    reason = str(failure.value)
    assert reason.startswith("Memory will not work with this server.")
    assert "tool calling: told to call save_memory, the model answered in words" in reason
    printed = out.getvalue()
    assert "ok    chat streaming" in printed
    assert "FAIL  tool calling" in printed
    assert (
        'FAIL  tools left to choose: offered the tools as a turn offers them (tool_choice "auto"), the model '
        "called none:" in printed
    )
    assert "ok    embeddings" in printed


def test_a_server_that_refuses_tools_offered_as_a_turn_offers_them_fails(model_server: ModelServer) -> None:
    # A named call works, but tools offered with tool_choice "auto", as every turn offers
    # them, are refused (vLLM started without auto tool choice answers so).
    model_server.queue_text("Hello there.")
    model_server.queue_tool_calls([("save_memory", {"key": "left-shoulder"})])
    model_server.queue_error(400, '"auto" tool choice requires --enable-auto-tool-choice to be set')
    out = StringIO()

    with pytest.raises(CommandError) as failure:
        call_command("check_model", stdout=out)

    assert "Memory will not work with this server." in str(failure.value)
    assert "tools left to choose: the model answered 400" in str(failure.value)
    assert "FAIL  tools left to choose" in out.getvalue()
    assert model_server.chat_requests()[2]["tool_choice"] == "auto"


def test_a_server_without_embeddings_fails_saying_memory_will_not_work(model_server: ModelServer) -> None:
    model_server.queue_embedding_error(404, "This server serves no embeddings.")

    with pytest.raises(CommandError) as failure:
        call_command("check_model", stdout=StringIO())

    assert "Memory will not work with this server." in str(failure.value)
    assert "embeddings: the model answered 404" in str(failure.value)
    assert "This server serves no embeddings." in str(failure.value)


def test_the_fallbacks_learned_from_the_server_are_printed(model_server: ModelServer) -> None:
    # The first check offers no tools; the second is the first to send strict schemas.
    model_server.queue_text("Hello!")
    model_server.queue_error(400, "Unknown field: strict")

    printed = check_model()

    assert "Fallbacks the app will use with this server:\n  - tool schemas are sent without strict" in printed
    assert printed.rstrip().endswith("Memory will work with this server.")


def test_llama_cpp_pythons_server_is_said_to_call_tools_only_when_forced_and_its_doubled_pieces_noted(
    model_server: ModelServer,
) -> None:
    # llama-cpp-python's server: a forced call comes as tool_calls and again as the legacy
    # function_call, in the same chunks; left to choose, it answers in words.
    model_server.queue_raw_stream(stream_events("llama_cpp_python", "chat_text.sse"))
    model_server.queue_raw_stream(stream_events("llama_cpp_python", "chat_one_call.sse"))
    model_server.queue_raw_stream(stream_events("llama_cpp_python", "chat_text.sse"))
    out = StringIO()

    with pytest.raises(CommandError) as failure:
        call_command("check_model", stdout=out)

    printed = out.getvalue()
    assert "ok    tool calling: a forced save_memory call, with JSON arguments" in printed
    assert (
        'FAIL  tools left to choose: offered the tools as a turn offers them (tool_choice "auto"), the model '
        "called none, though it called one when told which: this server calls tools only when forced, so the "
        "coach would never remember"
    ) in printed
    assert "this server calls tools only when forced" in str(failure.value)
    assert (
        "note  each call once: the server streams each tool-call piece twice, in tool_calls and again as "
        "the legacy function_call; the app ignores the copy, so each call is applied once"
    ) in printed
    # Its streams carry no usage: the prompt's tokens are asked for once more, unstreamed.
    assert "ok    system prompt: " in printed and "(asked unstreamed: its streams carry no usage)" in printed
    asked = model_server.chat_requests()[3]
    assert not asked.get("stream") and asked["max_tokens"] == 1 and asked["messages"][0]["role"] == "system"
    assert "Token usage: estimated by the app" in printed


def test_a_server_that_drops_the_system_prompt_fails_saying_the_coach_would_not_see_its_memory(settings) -> None:
    with ModelServer(quirks=[DROPS_SYSTEM_PROMPT]) as dropping:
        settings.OPENAI_BASE_URL = dropping.base_url
        out = StringIO()
        with pytest.raises(CommandError) as failure:
            call_command("check_model", stdout=out)

    assert "FAIL  system prompt: the server counted " in out.getvalue()
    assert "it ignores the system message, so the coach would not see its memory" in str(failure.value)


def test_a_server_that_calls_tools_only_when_forced_fails_saying_so(settings) -> None:
    with ModelServer(quirks=[TOOLS_ONLY_WHEN_FORCED]) as forced_only:
        settings.OPENAI_BASE_URL = forced_only.base_url
        out = StringIO()
        with pytest.raises(CommandError) as failure:
            call_command("check_model", stdout=out)

    assert "ok    tool calling: a forced save_memory call" in out.getvalue()
    assert "this server calls tools only when forced, so the coach would never remember" in str(failure.value)


def test_a_server_that_sends_the_same_call_twice_is_noted_and_not_counted_as_parallel(
    model_server: ModelServer,
) -> None:
    model_server.queue_text("Hello there.")
    model_server.queue_tool_calls([("save_memory", SHOULDER), ("save_memory", SHOULDER)])
    model_server.queue_tool_calls([("save_memory", SHOULDER), ("save_memory", SHOULDER)])

    printed = check_model()

    assert "ok    tool calling: a forced save_memory call" in printed
    assert "note  tools left to choose: 1 call for two facts" in printed
    assert (
        "note  each call once: the server sent the same save_memory call twice in one response; the app "
        "applies each copy, and a write sent twice counts twice against MEMORY_MAX_WRITES_PER_TURN"
    ) in printed
    assert printed.rstrip().endswith("Memory will work with this server.")
