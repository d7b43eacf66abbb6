"""`manage.py check_model`: can the coach remember things with the configured model server?

Memory needs three things of a server: the system prompt read (the memory block is in
it), tool calls when the model is left to choose (the model saves, updates and recalls
memories by calling the memory tools, and a turn never forces one) and embeddings (the
near-copy check and search). A server that streams words but drops the system prompt, or
calls a tool only when told which, gives a coach that answers and never remembers, which
looks like a working app; this command says so in under a minute, before a person finds
out. It talks to the model only: it never opens the database.
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
from infra.tokens import estimate_tokens
from memory.tool_schemas import tool_definitions

# All the checks together, so the answer comes within a minute whatever the server does.
TOTAL_SECONDS = 55.0
STEP_SECONDS = 20.0
SAVE = "save_memory"
EACH_ONCE = "each call once"
SYSTEM = "You are a coach. When the person tells you something worth remembering, save it with save_memory."
# A system prompt of a coach's length (a memory block's worth, about 1,000 tokens), so a
# server that drops or cuts it shows in the prompt tokens it reports.
LONG_SYSTEM = (
    SYSTEM
    + "\n\n# What you remember\n"
    + "".join(
        f"- note {n}: the person trains on {day}s and keeps a training log of every session.\n"
        for n, day in enumerate(["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"] * 6)
    )
)
# Reported prompt tokens below this share of the prompt's estimated size: it did not arrive.
SYSTEM_READ_SHARE = 0.5
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
        "Check the configured model server: chat streaming, the system prompt read, tool calling (forced and "
        "left to choose, parallel), no call sent twice, a prompt cache, and embeddings; print what it supports "
        "and which fallbacks the app uses; exit 1 if memory cannot work."
    )
    # It never touches the database, so it skips the checks that might.
    requires_system_checks: list[str] = []

    def handle(self, *args: Any, **options: Any) -> None:
        # What the app learned before (in this process) is not what this server does now.
        llm.forget_fallbacks()
        self.stdout.write(f"Model server: {llm.server_base_url()}\n")
        if settings.EMBEDDING_BASE_URL:
            self.stdout.write(f"Embedding server: {settings.EMBEDDING_BASE_URL}\n")
        self.stdout.write(f"Chat model: {settings.COACH_MODEL}; embedding model: {settings.EMBEDDING_MODEL}\n")
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
    streamed: list[llm.ModelResponse] = []
    streaming = await _timed(partial(_streaming, streamed), "chat streaming", deadline)
    tools = [
        await _timed(partial(_forced_tool_call, with_tools), "tool calling", deadline),
        # Essential when refused, or when nothing is called: a turn offers its tools exactly
        # so (tool_choice "auto"), and some servers take a named call but refuse that (vLLM
        # without auto tool choice) or never call a tool unless named (llama-cpp-python).
        await _timed(partial(_tools_left_to_choose, with_tools), "tools left to choose", deadline),
    ]
    # After the tool checks, so a server's answers come in the order the checks ask them.
    system = await _timed(partial(_system_prompt_read, streamed), "system prompt", deadline)
    doubled = _each_call_once(with_tools)
    return [
        streaming,
        system,
        *tools,
        *([doubled] if doubled else []),
        await _timed(partial(_prompt_cache, streamed), "prompt cache", deadline),
        await _timed(_embeddings, "embeddings", deadline),
    ]


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
    user_text: str, *, tools: list[dict[str, Any]] | None = None, tool_choice: Any = None, system: str = SYSTEM
) -> tuple[llm.ModelResponse, int]:
    """The whole response and how many pieces of words it came in."""
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user_text}]
    pieces = 0
    response: llm.ModelResponse | None = None
    async for piece in llm.stream_chat(messages, tools=tools, tool_choice=tool_choice):
        if isinstance(piece, llm.TextDelta):
            pieces += 1
        else:
            response = piece
    assert response is not None, "stream_chat always ends with the whole response"
    return response, pieces


HELLO = "Say hello in one short sentence."


async def _streaming(seen: list[llm.ModelResponse]) -> Finding:
    response, pieces = await _response(HELLO, system=LONG_SYSTEM)
    seen.append(response)
    if not response.text.strip():
        return Finding("chat streaming", False, "the server streamed no words")
    usage = "with" if response.usage else "without"
    detail = f"the reply came in {pieces} pieces, {usage} token usage"
    return Finding("chat streaming", True, detail, usage_counted=response.usage is not None)


async def _system_prompt_read(streamed: list[llm.ModelResponse]) -> Finding:
    """Whether the prompt tokens the server reports say the system prompt reached the model:
    some chat templates have no system role and drop it, memory block and all, silently.
    A server that sends no usage in a stream is asked once more, unstreamed."""
    what = "system prompt"
    sent = estimate_tokens(LONG_SYSTEM) + estimate_tokens(HELLO)
    usage = streamed[0].usage if streamed else None
    counted = usage.prompt_tokens if usage is not None else None
    how = ""
    if counted is None:
        messages = [{"role": "system", "content": LONG_SYSTEM}, {"role": "user", "content": HELLO}]
        counted = await asyncio.to_thread(llm.prompt_tokens_counted, messages)
        how = " (asked unstreamed: its streams carry no usage)"
    if counted is None:
        return Finding(what, False, "not known: the server reports no prompt tokens", essential=False)
    if counted < SYSTEM_READ_SHARE * sent:
        return Finding(
            what,
            False,
            f"the server counted {counted:,} prompt tokens for a prompt of about {sent:,}{how}: it ignores "
            "the system message, so the coach would not see its memory",
        )
    return Finding(what, True, f"{counted:,} prompt tokens counted for a prompt of about {sent:,}{how}")


async def _prompt_cache(streamed: list[llm.ModelResponse]) -> Finding:
    """The first request again: does the server say it read the repeated prompt from a cache?
    A conversation's prompt repeats every turn (DESIGN.md section 3.3), so a cache pays."""
    what = "prompt cache"
    if not streamed or streamed[0].usage is None:
        return Finding(what, False, "not known: the server reports no prompt tokens", essential=False)
    response, _ = await _response(HELLO, system=LONG_SYSTEM)
    usage = response.usage
    if usage is None or usage.cached_tokens is None:
        return Finding(
            what, False, "the server reports no cached tokens: each turn's prompt is read in full", essential=False
        )
    return Finding(
        what,
        usage.cached_tokens > 0,
        f"a repeated prompt: {usage.cached_tokens:,} of {usage.prompt_tokens:,} tokens read from the server's cache",
        essential=False,
    )


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


async def _tools_left_to_choose(seen: list[llm.ModelResponse]) -> Finding:
    forced_worked = bool(seen and any(call.name == SAVE for call in seen[0].tool_calls))
    response, _ = await _response(TWO_FACTS, tools=tool_definitions(), tool_choice="auto")
    seen.append(response)
    # A call sent twice over is not a second call.
    calls = len({(call.name, call.arguments) for call in response.tool_calls})
    if calls >= 2:
        return Finding("tools left to choose", True, f"{calls} calls in one response (parallel)", essential=False)
    if calls == 1:
        return Finding(
            "tools left to choose",
            False,
            "1 call for two facts: memories are saved one round at a time (slower, still works)",
            essential=False,
        )
    told = ", though it called one when told which" if forced_worked else ""
    return Finding(
        "tools left to choose",
        False,
        f'offered the tools as a turn offers them (tool_choice "auto"), the model called none{told}: '
        "this server calls tools only when forced, so the coach would never remember",
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
