"""Where model servers differ on the request: a parameter one accepts, another refuses with
a 400 (or, for a stream with automatic tool choice, a 500 that says so). Each fallback is
learned from the first refusal, per server (base URL and model), for the life of the
process, and the request is sent again at once, so the person never sees it.

Where a server takes a request and then does less than it asked: a system prompt that the
reported prompt tokens say never reached the model is logged once per server."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import openai
from django.conf import settings

from infra.tokens import CHARS_PER_TOKEN, estimate_tokens

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Fallback:
    name: str
    # The request field a 400 must name for this fallback to apply.
    refused: re.Pattern[str]
    # What the app does from then on, in words (the log, check_model).
    description: str
    # The statuses a refusal comes with: a 400 (or 422) as a rule.
    statuses: tuple[int, ...] = (400, 422)


FALLBACKS = (
    Fallback(
        "no-parallel-tool-calls",
        re.compile(r"\bparallel_tool_calls\b"),
        "parallel_tool_calls is left out of requests (the server refused it)",
    ),
    Fallback(
        "max-completion-tokens",
        re.compile(r"\bmax_tokens\b"),
        "the reply's length limit is sent as max_completion_tokens (the server refused max_tokens)",
    ),
    Fallback(
        "no-stream-usage",
        re.compile(r"\b(stream_options|include_usage)\b"),
        "usage is not asked for in the stream (the server refused stream_options); tokens are estimated",
    ),
    # llama-cpp-python's chatml-function-calling format refuses a stream with automatic tool
    # choice, as an internal error (500) with these words; the same request unstreamed works.
    Fallback(
        "unstreamed-tool-rounds",
        re.compile(r"automatic streaming tool choice", re.IGNORECASE),
        "rounds that offer tools are asked unstreamed (the server refused automatic tool choice in a stream); "
        "their words arrive at once",
        statuses=(400, 422, 500),
    ),
    # Last: "strict" is the likeliest word to turn up in a message about something else.
    Fallback(
        "no-strict",
        re.compile(r"\bstrict\b", re.IGNORECASE),
        "tool schemas are sent without strict (the server refused it); arguments are still checked on our side",
    ),
)
_learned: dict[tuple[str, str], set[str]] = {}
# The servers already said (in the log) to drop the system prompt.
_warned_system_prompt: set[tuple[str, str]] = set()
_learned_lock = threading.Lock()


def server_base_url() -> str:
    """Where the model is asked: OPENAI_BASE_URL, or OpenAI's own API when it is unset."""
    return settings.OPENAI_BASE_URL or "https://api.openai.com/v1"


def _server() -> tuple[str, str]:
    return (server_base_url(), settings.COACH_MODEL)


def _learned_names() -> set[str]:
    with _learned_lock:
        return set(_learned.get(_server(), ()))


def fallbacks_in_use() -> list[Fallback]:
    """The fallbacks learned so far for the configured server, in a stable order."""
    names = _learned_names()
    return [fallback for fallback in FALLBACKS if fallback.name in names]


def forget_fallbacks() -> None:
    """Start again from the full request with every server (a changed server, a test)."""
    with _learned_lock:
        _learned.clear()
        _warned_system_prompt.clear()


def _adapted(arguments: dict[str, Any], names: set[str]) -> dict[str, Any]:
    """The request as this server takes it."""
    body = dict(arguments)
    if "no-parallel-tool-calls" in names:
        body.pop("parallel_tool_calls", None)
    if "max-completion-tokens" in names and "max_tokens" in body:
        body["max_completion_tokens"] = body.pop("max_tokens")
    if "no-stream-usage" in names:
        body.pop("stream_options", None)
    if "unstreamed-tool-rounds" in names and body.get("stream") and body.get("tool_choice") == "auto":
        body["stream"] = False
        body.pop("stream_options", None)
    if "no-strict" in names and body.get("tools"):
        body["tools"] = [
            {**tool, "function": {key: value for key, value in tool["function"].items() if key != "strict"}}
            if isinstance(tool.get("function"), dict)
            else tool
            for tool in body["tools"]
        ]
    return body


def _fallback_for(error: openai.OpenAIError, body: dict[str, Any]) -> Fallback | None:
    """The fallback a refusal asks for: a 400 that names a field this request sent."""
    if not isinstance(error, openai.APIStatusError):
        return None
    said = error.message
    if isinstance(error.body, dict):
        said = f"{said} {error.body.get('param') or ''} {error.body.get('message') or ''}"
    for fallback in FALLBACKS:
        # Only a fallback that would change this request: one it still carries the field of.
        if (
            error.status_code in fallback.statuses
            and fallback.refused.search(said)
            and _adapted(body, {fallback.name}) != body
        ):
            return fallback
    return None


def _learn(fallback: Fallback) -> None:
    server = _server()
    with _learned_lock:
        names = _learned.setdefault(server, set())
        if fallback.name in names:
            return
        names.add(fallback.name)
    logger.warning("the model server at %s (model %s): %s", server[0], server[1], fallback.description)


def _learned_from(error: openai.OpenAIError, body: dict[str, Any]) -> bool:
    """Learn the fallback a refusal asks for; False when it asks for none (the error stands).
    Each fallback takes one field out, so a request is tried at most len(FALLBACKS) + 1 times."""
    fallback = _fallback_for(error, body)
    if fallback is not None:
        _learn(fallback)
    return fallback is not None


def sent_with_fallbacks(arguments: dict[str, Any], send: Callable[[dict[str, Any]], Any]) -> Any:
    while True:
        body = _adapted(arguments, _learned_names())
        try:
            return send(body)
        except openai.OpenAIError as error:
            if not _learned_from(error, body):
                raise


async def sent_with_fallbacks_async(arguments: dict[str, Any], send: Callable[[dict[str, Any]], Awaitable[Any]]) -> Any:
    while True:
        body = _adapted(arguments, _learned_names())
        try:
            return await send(body)
        except openai.OpenAIError as error:
            if not _learned_from(error, body):
                raise


# A system prompt this long or longer is the coach's (memory block and all); a server that
# reports fewer prompt tokens than this share of the request dropped it, or most of it.
SYSTEM_PROMPT_CHECKED_TOKENS = 200
SYSTEM_PROMPT_READ_SHARE = 0.5


def notice_system_prompt_dropped(messages: list[dict[str, Any]], prompt_tokens: int) -> bool:
    """Log, once per server for the process's life, when a response's reported prompt tokens
    say its long system prompt did not reach the model. Whether it looks dropped."""
    system = "".join(
        message["content"]
        for message in messages
        if message.get("role") in ("system", "developer") and isinstance(message.get("content"), str)
    )
    sent = sum(len(message["content"]) for message in messages if isinstance(message.get("content"), str))
    if estimate_tokens(system) < SYSTEM_PROMPT_CHECKED_TOKENS or prompt_tokens >= SYSTEM_PROMPT_READ_SHARE * (
        sent / CHARS_PER_TOKEN
    ):
        return False
    server = _server()
    with _learned_lock:
        first = server not in _warned_system_prompt
        _warned_system_prompt.add(server)
    if first:
        logger.warning(
            "the model server at %s (model %s) counted %s prompt tokens for a prompt of about %s: it does not "
            "read the system message, so the coach does not see its memory (bin/manage check_model says more)",
            server[0],
            server[1],
            prompt_tokens,
            round(sent / CHARS_PER_TOKEN),
        )
    return True
