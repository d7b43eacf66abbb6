"""The language model gateway: the only module that imports the openai SDK.

Callers get our own frozen dataclasses and our own LLMError, never SDK objects, so the
provider can change (OPENAI_BASE_URL: OpenAI, Ollama, vLLM, the offline coach) without
the rest of the code knowing.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import openai
from django.conf import settings
from django.db import connection

from infra.dbsteps import release_connection
from infra.embedding_vectors import UnreadableVector, vector_of

# The fallbacks' public names are the gateway's: callers (check_model) ask it for them.
from infra.llm_fallbacks import Fallback as Fallback
from infra.llm_fallbacks import fallbacks_in_use as fallbacks_in_use
from infra.llm_fallbacks import forget_fallbacks as forget_fallbacks
from infra.llm_fallbacks import notice_system_prompt_dropped, sent_with_fallbacks, sent_with_fallbacks_async
from infra.llm_fallbacks import server_base_url as server_base_url
from infra.offline_coach_identity import NotOurOfflineCoach, check_before_sending, check_before_sending_async
from infra.stream_assembly import ToolCallAssembler

logger = logging.getLogger(__name__)

# The offline coach and many local servers need no key, but the SDK insists on one.
NO_KEY = "no-key-needed"
# Pauses before each retry of an embeddings request that failed in a way that may pass
# (LLM_MAX_RETRIES of them at most), while its deadline leaves room.
EMBEDDING_RETRY_PAUSES_SECONDS = (0.25, 0.5, 1.0, 2.0)


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
    # The provider's token counts for this response, when it sent them.
    usage: Usage | None = None
    # Tool-call pieces the server sent again as a legacy function_call, and that were ignored.
    legacy_copies_ignored: int = 0


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    # Of the prompt's tokens, those the provider read from its cache (None: it did not say).
    cached_tokens: int | None = None


async def stream_chat(
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
    tool_choice: str | dict[str, Any] | None = None,
) -> AsyncIterator[TextDelta | ModelResponse]:
    """Stream one chat completion: TextDelta pieces, then one ModelResponse.

    A stream that stops before saying it finished, or a tool call without a name, is an
    LLMError: a reply cut short is never passed on as if it were whole.
    """
    arguments = _chat_arguments(messages, tools=tools, tool_choice=tool_choice)
    text: list[str] = []
    calls = ToolCallAssembler()
    finish_reason = None
    usage: Usage | None = None
    try:
        # The SDK's documented low-level request (`client.post`), with our body and chunks
        # as plain JSON. create() would first walk the body against its TypedDicts and
        # build a model object for every token: for a long prompt and five tool schemas
        # that cost more CPU than all the rest of a turn. Same HTTP, same SSE decoding.
        stream = await sent_with_fallbacks_async(arguments, _chat_posted)
        async for chunk in stream:
            usage = _usage_in(chunk) or usage
            delta, finished = _delta_of(chunk)
            content = delta.get("content")
            if isinstance(content, str) and content:
                text.append(content)
                yield TextDelta(content)
            calls.add_delta(delta)
            finish_reason = finished or finish_reason
    except openai.OpenAIError as error:
        raise as_llm_error(error) from error
    if usage is not None:
        notice_system_prompt_dropped(messages, usage.prompt_tokens)
    yield _whole_response("".join(text), calls, finish_reason, usage)


async def _chat_posted(body: dict[str, Any]) -> AsyncIterator[object]:
    """The request sent: its stream of chunks, or (where a fallback asks for a round
    unstreamed) the whole completion as the one chunk its stream would add up to."""
    client = _async_client()
    if body.get("stream"):
        stream: AsyncIterator[object] = await client.post(
            "/chat/completions", body=body, cast_to=object, stream=True, stream_cls=openai.AsyncStream[object]
        )
        return stream
    return _as_one_chunk(await client.post("/chat/completions", body=body, cast_to=object))


async def _as_one_chunk(completion: object) -> AsyncIterator[object]:
    whole: dict[str, Any] = completion if isinstance(completion, dict) else {}
    choices = whole.get("choices")
    choice: dict[str, Any] = (
        choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    )
    message: dict[str, Any] = choice["message"] if isinstance(choice.get("message"), dict) else {}
    calls: list[Any] = message["tool_calls"] if isinstance(message.get("tool_calls"), list) else []
    delta = {**message, "tool_calls": [{**call, "index": n} for n, call in enumerate(calls) if isinstance(call, dict)]}
    usage = whole.get("usage")
    yield {"choices": [{"index": 0, "delta": delta, "finish_reason": choice.get("finish_reason")}], "usage": usage}


def _chat_arguments(
    messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None, tool_choice: str | dict[str, Any] | None
) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "model": settings.COACH_MODEL,
        "messages": messages,
        "stream": True,
        "max_tokens": settings.COACH_MAX_TOKENS,
        # Usage arrives in a last chunk of its own, only when asked for.
        "stream_options": {"include_usage": True},
    }
    if tools:
        arguments["tools"] = tools
        # Said outright: OpenAI allows parallel calls by default, llama.cpp's server only when
        # asked. The turn applies a batch of calls in order, each seeing the one before, so two
        # saves in one round cost one round trip, not two.
        arguments["parallel_tool_calls"] = True
        # Said outright too: "auto" is the API's default with tools, but some servers leave
        # the tools out of the prompt unless a tool choice is given (llama-cpp-python's).
        arguments["tool_choice"] = tool_choice if tool_choice is not None else "auto"
    return arguments


def _delta_of(chunk: object) -> tuple[dict[str, Any], str | None]:
    """A chunk's delta and the reason it finished with, if it did. Chunks without a choice
    carry other things: usage at the end, a content filter's notes at the start (Azure).
    Only one choice is ever asked for."""
    choices = chunk.get("choices") if isinstance(chunk, dict) else None
    choice: dict[str, Any] = (
        choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    )
    delta, finished = choice.get("delta"), choice.get("finish_reason")
    return delta if isinstance(delta, dict) else {}, finished if isinstance(finished, str) and finished else None


def _whole_response(
    text: str, calls: ToolCallAssembler, finish_reason: str | None, usage: Usage | None
) -> ModelResponse:
    if finish_reason is None:
        raise LLMError("the reply was cut off before it finished", retryable=True)
    tool_calls = tuple(
        ToolCall(id=call_id, name=name, arguments=arguments) for call_id, name, arguments in calls.calls()
    )
    if any(not call.name for call in tool_calls):
        raise LLMError("the model sent a tool call without a name", retryable=True)
    # A response with no words and no calls is whole: after a round whose words came with
    # its tool calls, it is how a model says it has nothing to add. The turn judges a reply
    # with no words at all (coach/turn.py).
    if finish_reason == "function_call":
        # The legacy name for the same thing, from servers that predate tools.
        finish_reason = "tool_calls"
    return ModelResponse(
        text=text,
        tool_calls=tool_calls,
        finish_reason=finish_reason,
        usage=usage,
        legacy_copies_ignored=calls.mirrored_legacy_pieces,
    )


def complete(messages: list[dict[str, Any]]) -> str:
    """One whole answer, for background jobs (summaries, emails, episodes)."""
    _off_the_database()
    try:
        response = sent_with_fallbacks(
            {"model": settings.COACH_MODEL, "messages": messages, "max_tokens": settings.COACH_MAX_TOKENS},
            lambda body: _client().chat.completions.create(**body),
        )
    except openai.OpenAIError as error:
        raise as_llm_error(error) from error
    if response.usage is not None:
        notice_system_prompt_dropped(messages, response.usage.prompt_tokens)
    content: str | None = response.choices[0].message.content if response.choices else None
    if not content or not content.strip():
        raise LLMError("the model answered with nothing", retryable=True)
    return content.strip()


def prompt_tokens_counted(messages: list[dict[str, Any]]) -> int | None:
    """The prompt tokens a server says it read for `messages`, asked unstreamed with a reply
    of one token: for a server that sends no usage in its streams (check_model asks whether
    the system prompt reached the model). None when it says nothing."""
    _off_the_database()
    try:
        answer = sent_with_fallbacks(
            {"model": settings.COACH_MODEL, "messages": messages, "max_tokens": 1},
            lambda body: _client().post("/chat/completions", body=body, cast_to=object),
        )
    except openai.OpenAIError as error:
        raise as_llm_error(error) from error
    usage = answer.get("usage") if isinstance(answer, dict) else None
    prompt = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return prompt if isinstance(prompt, int) else None


def embed(texts: list[str], *, within_seconds: float | None = None) -> list[Embedding]:
    """One embedding per text, in order, from EMBEDDING_MODEL, within EMBEDDING_TIMEOUT_SECONDS
    retries included (or `within_seconds`, for a batch job no person waits on): past it, an
    LLMError that says so (retryable)."""
    if not texts:
        return []
    model = settings.EMBEDDING_MODEL
    _off_the_database()
    # The SDK's documented low-level request, as for the chat: the answer as plain JSON,
    # without a model object built for it. base64 (compact float32) is asked for; the
    # decoding is infra/embedding_vectors.py's, which also takes the floats some servers send.
    response = _embeddings_answered(
        {"model": model, "input": texts, "encoding_format": "base64"},
        seconds=settings.EMBEDDING_TIMEOUT_SECONDS if within_seconds is None else within_seconds,
    )
    data = response.get("data") if isinstance(response, dict) else None
    items = [item if isinstance(item, dict) else {} for item in data] if isinstance(data, list) else []
    if all(isinstance(item.get("index"), int) for item in items):
        items.sort(key=lambda item: item["index"])
    try:
        vectors = [vector_of(item.get("embedding")) for item in items]
    except UnreadableVector as error:
        raise LLMError(str(error), retryable=False) from error
    if len(vectors) != len(texts):
        raise LLMError(f"asked for {len(texts)} embeddings, got {len(vectors)}", retryable=True)
    if len({len(vector) for vector in vectors}) > 1:
        raise LLMError("the embeddings answer mixed vectors of different lengths", retryable=False)
    return [Embedding(vector=vector, model=model) for vector in vectors]


def _embeddings_answered(body: dict[str, Any], *, seconds: float) -> object:
    """The embeddings server's answer to `body`, asked again after a failure that may pass,
    all within one deadline: the SDK's timeout is per try, and its retries would each get
    the whole of it (a server that hangs held a chat turn for its own 120 s deadline)."""
    deadline = time.monotonic() + seconds
    for pause in (*EMBEDDING_RETRY_PAUSES_SECONDS[: settings.LLM_MAX_RETRIES], None):
        left = max(deadline - time.monotonic(), 0.001)
        try:
            return _embedding_client().post(
                "/embeddings", body=body, cast_to=object, options={"timeout": left, "max_retries": 0}
            )
        except openai.APITimeoutError as error:
            raise LLMError(f"the embeddings did not come back within {seconds:g} s", retryable=True) from error
        except openai.OpenAIError as error:
            failure = as_llm_error(error)
            if not failure.retryable or pause is None or deadline - time.monotonic() <= pause:
                raise failure from error
        time.sleep(pause)
    raise AssertionError("unreachable")


def _usage_in(chunk: object) -> Usage | None:
    """The token counts a chunk carries, if any (the last one, when asked for; some servers
    put them on every chunk, or only on the one that finishes)."""
    if not isinstance(chunk, dict):
        return None
    usage = chunk.get("usage")
    if not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    return Usage(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=_cached_in(chunk, usage))


def _cached_in(chunk: dict[str, Any], usage: dict[str, Any]) -> int | None:
    """The prompt tokens a server says it read from its cache: OpenAI's and vLLM's
    `usage.prompt_tokens_details.cached_tokens`, llama.cpp's server's `timings.cache_n`."""
    details, timings = usage.get("prompt_tokens_details"), chunk.get("timings")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if isinstance(cached, int):
        return cached
    read = timings.get("cache_n") if isinstance(timings, dict) else None
    if isinstance(read, int):
        return read
    return None


class ModelCallInTransaction(RuntimeError):
    """A model call from inside a database transaction: a bug in the caller."""


def _off_the_database() -> None:
    """Before waiting on the model: no transaction may be open (it would keep its locks and
    its connection for as long as the model takes, up to LLM_TIMEOUT_SECONDS per try), and
    this thread's connection goes back to the pool until the next query needs one. A test
    case's own wrapping transaction does not count."""
    # _from_testcase is Django's own mark, missing from django-stubs.
    if any(not block._from_testcase for block in connection.atomic_blocks):  # type: ignore[attr-defined]
        raise ModelCallInTransaction("the model is never called inside a database transaction; call it first")
    release_connection()


def as_llm_error(error: openai.OpenAIError) -> LLMError:
    """Our error for an SDK error: timeouts, rate limits, outages and 5xx may pass."""
    if isinstance(error.__cause__, NotOurOfflineCoach):
        # Its own words: what holds the port, and what to do about it.
        return LLMError(str(error.__cause__), retryable=True)
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


def _embedding_client() -> openai.OpenAI:
    """Where embeddings are asked for: EMBEDDING_BASE_URL and its key, else the chat's."""
    return _client_for(
        settings.EMBEDDING_BASE_URL or settings.OPENAI_BASE_URL,
        settings.EMBEDDING_API_KEY or settings.OPENAI_API_KEY,
        settings.LLM_TIMEOUT_SECONDS,
        settings.LLM_MAX_RETRIES,
    )


# An async client's connection pool belongs to the event loop it first ran on.
_async_clients: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str | None, str, float, int], openai.AsyncOpenAI]
] = weakref.WeakKeyDictionary()


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
            base_url=base_url,
            api_key=api_key or NO_KEY,
            timeout=timeout,
            max_retries=min(max_retries, 1),
            # Each request to the offline coach's address first asks it to prove it is ours.
            http_client=openai.DefaultAsyncHttpxClient(event_hooks={"request": [check_before_sending_async]}),
        )
    return clients[options]


@lru_cache(maxsize=4)
def _client_for(base_url: str | None, api_key: str, timeout: float, max_retries: int) -> openai.OpenAI:
    # Explicit timeout and retries: the SDK's defaults (600 s, 2 retries) would hold a
    # chat turn for ten minutes before telling the user anything.
    return openai.OpenAI(
        base_url=base_url,
        api_key=api_key or NO_KEY,
        timeout=timeout,
        max_retries=max_retries,
        # Each request to the offline coach's address first asks it to prove it is ours.
        http_client=openai.DefaultHttpxClient(event_hooks={"request": [check_before_sending]}),
    )
