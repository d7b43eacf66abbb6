"""`manage.py check_model`: can the coach remember things with the configured model server?

Memory needs two things of a server: tool calls (the model saves, updates and recalls
memories by calling the memory tools) and embeddings (the near-copy check and search).
A server that streams words but never calls a tool gives a coach that answers and never
remembers, which looks like a working app; this command says so in under a minute,
before a person finds out. It talks to the model only: it never opens the database.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from infra import llm
from memory.tool_schemas import tool_definitions

# All the checks together, so the answer comes within a minute whatever the server does.
TOTAL_SECONDS = 55.0
STEP_SECONDS = 20.0
SAVE = "save_memory"
EACH_ONCE = "each call once"
SYSTEM = "You are a coach. When the person tells you something worth remembering, save it with save_memory."
# Statements any model that calls tools recognises as worth remembering.
ONE_FACT = "Please remember this: I have a bad left shoulder, so no overhead pressing."
TWO_FACTS = "Please remember two separate things: I have a bad left shoulder. I'm giving a talk in June."


@dataclass(frozen=True)
class Finding:
    what: str
    ok: bool
    detail: str
    # Without it, memory cannot work with this server.
    essential: bool = True
    # Chat streaming only: whether the server counted the tokens (sent usage).
    usage_counted: bool = False


class Command(BaseCommand):
    help = (
        "Check the configured model server: chat streaming, tool calling, parallel tool calls, no call "
        "sent twice, and embeddings; print what it supports and which fallbacks the app uses; exit 1 if "
        "memory cannot work."
    )
    # It never touches the database, so it skips the checks that might.
    requires_system_checks: list[str] = []

    def handle(self, *args: Any, **options: Any) -> None:
        # What the app learned before (in this process) is not what this server does now.
        llm.forget_fallbacks()
        self.stdout.write(
            f"Model server: {llm.server_base_url()}\n"
            f"Chat model: {settings.COACH_MODEL}; embedding model: {settings.EMBEDDING_MODEL}\n"
        )
        findings = asyncio.run(_all_checks())
        for finding in findings:
            mark = "ok  " if finding.ok else ("FAIL" if finding.essential else "note")
            self.stdout.write(f"  {mark}  {finding.what}: {finding.detail}")
        fallbacks = llm.fallbacks_in_use()
        self.stdout.write("Fallbacks the app will use with this server:" + ("" if fallbacks else " none"))
        for fallback in fallbacks:
            self.stdout.write(f"  - {fallback.description}")
        if not findings[0].ok:
            usage = "not known (no stream came back)"
        elif findings[0].usage_counted:
            usage = "counted by the server"
        else:
            usage = "estimated by the app (the server sends no usage in its streams)"
        self.stdout.write(f"Token usage: {usage}")
        failed = [finding for finding in findings if finding.essential and not finding.ok]
        if failed:
            reasons = "; ".join(f"{finding.what}: {finding.detail}" for finding in failed)
            raise CommandError(f"Memory will not work with this server. {reasons}")
        self.stdout.write(self.style.SUCCESS("Memory will work with this server."))


async def _all_checks() -> list[Finding]:
    deadline = time.monotonic() + TOTAL_SECONDS
    # What the two tool checks got back, for the check that no call came twice.
    with_tools: list[llm.ModelResponse] = []
    findings = [
        await _timed(_streaming, "chat streaming", deadline),
        await _timed(partial(_forced_tool_call, with_tools), "tool calling", deadline),
        # Essential when refused: a turn offers its tools exactly so (tool_choice "auto"), and
        # some servers take a named call but refuse that (vLLM without auto tool choice).
        await _timed(partial(_parallel_tool_calls, with_tools), "parallel tool calls", deadline),
    ]
    doubled = _each_call_once(with_tools)
    return [*findings, *([doubled] if doubled else []), await _timed(_embeddings, "embeddings", deadline)]


async def _timed(check: Callable[[], Awaitable[Finding]], what: str, deadline: float) -> Finding:
    """One check, bounded by its share of the minute; a failure is a finding, not a crash."""
    seconds = min(STEP_SECONDS, deadline - time.monotonic())
    if seconds <= 0:
        return Finding(what, False, "not checked: the server used up the minute")
    try:
        async with asyncio.timeout(seconds):
            return await check()
    except TimeoutError:
        return Finding(what, False, f"no answer within {seconds:.0f} s")
    except llm.LLMError as error:
        return Finding(what, False, str(error))


async def _response(
    user_text: str, *, tools: list[dict[str, Any]] | None = None, tool_choice: Any = None
) -> tuple[llm.ModelResponse, int]:
    """The whole response and how many pieces of words it came in."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user_text}]
    pieces = 0
    response: llm.ModelResponse | None = None
    async for piece in llm.stream_chat(messages, tools=tools, tool_choice=tool_choice):
        if isinstance(piece, llm.TextDelta):
            pieces += 1
        else:
            response = piece
    assert response is not None, "stream_chat always ends with the whole response"
    return response, pieces


async def _streaming() -> Finding:
    response, pieces = await _response("Say hello in one short sentence.")
    if not response.text.strip():
        return Finding("chat streaming", False, "the server streamed no words")
    usage = "with" if response.usage else "without"
    detail = f"the reply came in {pieces} pieces, {usage} token usage"
    return Finding("chat streaming", True, detail, usage_counted=response.usage is not None)


async def _forced_tool_call(seen: list[llm.ModelResponse]) -> Finding:
    choice = {"type": "function", "function": {"name": SAVE}}
    response, _ = await _response(ONE_FACT, tools=tool_definitions(), tool_choice=choice)
    seen.append(response)
    saves = [call for call in response.tool_calls if call.name == SAVE]
    if not saves:
        answered = "answered in words" if response.text.strip() else "answered nothing"
        return Finding(
            "tool calling", False, f"told to call {SAVE}, the model {answered}: the coach would never remember"
        )
    if not all(_json_object(call.arguments) for call in saves):
        return Finding("tool calling", False, f"the model called {SAVE} with arguments that are not a JSON object")
    return Finding("tool calling", True, f"a forced {SAVE} call, with JSON arguments")


async def _parallel_tool_calls(seen: list[llm.ModelResponse]) -> Finding:
    response, _ = await _response(TWO_FACTS, tools=tool_definitions(), tool_choice="auto")
    seen.append(response)
    # A call sent twice over is not a second call.
    calls = len({(call.name, call.arguments) for call in response.tool_calls})
    if calls >= 2:
        return Finding("parallel tool calls", True, f"{calls} calls in one response", essential=False)
    return Finding(
        "parallel tool calls",
        False,
        f"{calls} call(s) for two facts: memories are saved one round at a time (slower, still works)",
        essential=False,
    )


def _each_call_once(responses: list[llm.ModelResponse]) -> Finding | None:
    """Whether any tool call came twice, and what the app does about it; None when no call
    came at all (the tool checks say so). Memory works either way, so never essential."""
    if not any(response.tool_calls for response in responses):
        return None
    said = []
    if any(response.legacy_copies_ignored for response in responses):
        said.append(
            "the server streams each tool-call piece twice, in tool_calls and again as the legacy "
            "function_call; the app ignores the copy, so each call is applied once"
        )
    repeated = sorted(set().union(*(_repeated(response) for response in responses)))
    if repeated:
        said.append(
            f"the server sent the same {' and '.join(repeated)} call twice in one response; the app applies "
            "each copy, and a write sent twice counts twice against MEMORY_MAX_WRITES_PER_TURN"
        )
    if not said:
        return Finding(EACH_ONCE, True, "no tool call came twice", essential=False)
    return Finding(EACH_ONCE, False, "; ".join(said), essential=False)


def _repeated(response: llm.ModelResponse) -> set[str]:
    """The names of the calls a response holds more than once: same name, same arguments."""
    counts = Counter((call.name, call.arguments) for call in response.tool_calls)
    return {name for (name, _), count in counts.items() if count > 1}


async def _embeddings() -> Finding:
    texts = ["I have a bad left shoulder.", "I'm giving a talk in June."]
    # The gateway's embed is synchronous (it serves the memory services); off this loop.
    vectors = await asyncio.to_thread(llm.embed, texts)
    sizes = {len(vector.vector) for vector in vectors}
    if len(vectors) != len(texts) or sizes == {0} or len(sizes) != 1:
        return Finding("embeddings", False, "the server returned empty or uneven vectors")
    return Finding("embeddings", True, f"{len(vectors)} vectors of {sizes.pop()} dimensions")


def _json_object(arguments: str) -> bool:
    try:
        return isinstance(json.loads(arguments), dict)
    except ValueError:
        return False
