"""The language model gateway: the only module that imports the openai SDK.

Callers get our own frozen dataclasses and our own LLMError, never SDK objects, so the
provider can change (OPENAI_BASE_URL: OpenAI, Ollama, vLLM, the offline coach) without
the rest of the code knowing.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import openai
from django.conf import settings
from django.db import connection

from infra.dbsteps import release_connection

# The offline coach and many local servers need no key, but the SDK insists on one.
NO_KEY = "no-key-needed"


class LLMError(Exception):
    """The model could not answer. `retryable` says whether trying again may help."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


@dataclass(frozen=True)
class Embedding:
    vector: list[float]
    model: str


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class TextDelta:
    """A piece of the reply, as it arrives."""

    text: str


@dataclass(frozen=True)
class ModelResponse:
    """The whole of one model response, after its last piece."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str


async def stream_chat(
    messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None
) -> AsyncIterator[TextDelta | ModelResponse]:
    """Stream one chat completion: TextDelta pieces, then one ModelResponse.

    A stream that stops before saying it finished, or a tool call without a name, is an
    LLMError: a reply cut short is never passed on as if it were whole.
    """
    arguments: dict[str, Any] = {
        "model": settings.COACH_MODEL,
        "messages": messages,
        "stream": True,
        "max_tokens": settings.COACH_MAX_TOKENS,
    }
    if tools:
        arguments["tools"] = tools
    text: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    finish_reason = None
    try:
        # The SDK's documented low-level request (`client.post`), with our body and chunks
        # as plain JSON. create() would first walk the body against its TypedDicts and
        # build a model object for every token: for a long prompt and five tool schemas
        # that cost more CPU than all the rest of a turn. Same HTTP, same SSE decoding.
        stream = await _async_client().post(
            "/chat/completions", body=arguments, cast_to=object, stream=True, stream_cls=openai.AsyncStream[object]
        )
        async for chunk in stream:
            choice = (chunk.get("choices") or [{}])[0] if isinstance(chunk, dict) else {}
            delta = choice.get("delta") or {}
            if content := delta.get("content"):
                text.append(content)
                yield TextDelta(content)
            for part in delta.get("tool_calls") or []:
                call = calls.setdefault(part.get("index", 0), {"id": "", "name": "", "arguments": ""})
                function = part.get("function") or {}
                call["id"] = part.get("id") or call["id"]
                call["name"] = function.get("name") or call["name"]
                call["arguments"] += function.get("arguments") or ""
            finish_reason = choice.get("finish_reason") or finish_reason
    except openai.OpenAIError as error:
        raise as_llm_error(error) from error
    if finish_reason is None:
        raise LLMError("the reply was cut off before it finished", retryable=True)
    tool_calls = tuple(ToolCall(**calls[index]) for index in sorted(calls))
    if any(not call.name or not call.id for call in tool_calls):
        raise LLMError("the model sent a tool call without a name or id", retryable=True)
    yield ModelResponse(text="".join(text), tool_calls=tool_calls, finish_reason=finish_reason)


def complete(messages: list[dict[str, Any]]) -> str:
    """One whole answer, for background jobs (summaries, emails, episodes)."""
    _off_the_database()
    try:
        response = _client().chat.completions.create(
            model=settings.COACH_MODEL, messages=messages, max_tokens=settings.COACH_MAX_TOKENS
        )
    except openai.OpenAIError as error:
        raise as_llm_error(error) from error
    content = response.choices[0].message.content if response.choices else None
    if not content or not content.strip():
        raise LLMError("the model answered with nothing", retryable=True)
    return content.strip()


def embed(texts: list[str]) -> list[Embedding]:
    """One embedding per text, in order, from EMBEDDING_MODEL."""
    if not texts:
        return []
    model = settings.EMBEDDING_MODEL
    _off_the_database()
    try:
        response = _client().embeddings.create(model=model, input=texts)
    except openai.OpenAIError as error:
        raise as_llm_error(error) from error
    vectors = [item.embedding for item in sorted(response.data, key=lambda item: item.index)]
    if len(vectors) != len(texts):
        raise LLMError(f"asked for {len(texts)} embeddings, got {len(vectors)}", retryable=True)
    return [Embedding(vector=list(vector), model=model) for vector in vectors]


class ModelCallInTransaction(RuntimeError):
    """A model call from inside a database transaction: a bug in the caller."""


def _off_the_database() -> None:
    """Before waiting on the model: no transaction may be open (it would keep its locks and
    its connection for as long as the model takes, up to LLM_TIMEOUT_SECONDS per try), and
    this thread's connection goes back to the pool until the next query needs one. A test
    case's own wrapping transaction does not count."""
    if any(not block._from_testcase for block in connection.atomic_blocks):
        raise ModelCallInTransaction("the model is never called inside a database transaction; call it first")
    release_connection()


def as_llm_error(error: openai.OpenAIError) -> LLMError:
    """Our error for an SDK error: timeouts, rate limits, outages and 5xx may pass."""
    if isinstance(error, openai.APITimeoutError):
        return LLMError("the model did not answer in time", retryable=True)
    if isinstance(error, openai.APIConnectionError):
        return LLMError("the model could not be reached", retryable=True)
    if isinstance(error, openai.RateLimitError):
        return LLMError("the model is rate-limited", retryable=True)
    if isinstance(error, openai.APIStatusError):
        return LLMError(
            f"the model answered {error.status_code}: {error.message}",
            retryable=error.status_code >= 500 or error.status_code in (408, 409),
        )
    return LLMError(f"the model failed: {error}", retryable=False)


def _client() -> openai.OpenAI:
    return _client_for(
        settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY, settings.LLM_TIMEOUT_SECONDS, settings.LLM_MAX_RETRIES
    )


# An async client's connection pool belongs to the event loop it first ran on.
_async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple, openai.AsyncOpenAI]] = (
    weakref.WeakKeyDictionary()
)


def _async_client() -> openai.AsyncOpenAI:
    options = (
        settings.OPENAI_BASE_URL,
        settings.OPENAI_API_KEY,
        settings.LLM_TIMEOUT_SECONDS,
        settings.LLM_MAX_RETRIES,
    )
    clients = _async_clients.setdefault(asyncio.get_running_loop(), {})
    if options not in clients:
        base_url, api_key, timeout, max_retries = options
        # The chat is streamed to someone waiting: at most one retry, then Retry is theirs.
        clients[options] = openai.AsyncOpenAI(
            base_url=base_url, api_key=api_key or NO_KEY, timeout=timeout, max_retries=min(max_retries, 1)
        )
    return clients[options]


@lru_cache(maxsize=4)
def _client_for(base_url: str | None, api_key: str, timeout: float, max_retries: int) -> openai.OpenAI:
    # Explicit timeout and retries: the SDK's defaults (600 s, 2 retries) would hold a
    # chat turn for ten minutes before telling the user anything.
    return openai.OpenAI(base_url=base_url, api_key=api_key or NO_KEY, timeout=timeout, max_retries=max_retries)
