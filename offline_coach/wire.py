"""The OpenAI wire format: chat completions, stream chunks, embeddings, models and errors."""

from __future__ import annotations

import array
import base64
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from offline_coach.reply import Reply

CHAT_MODEL = "offline-coach"
ARGUMENT_PIECE_CHARS = 12
# A word with the space after it: how text streams, so a client sees it arrive word by word.
TEXT_PIECE = re.compile(r"\s*\S+\s*|\s+")
TOKEN = re.compile(r"\w+|[^\w\s]")

ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    408: ("timeout", None),
    409: ("conflict_error", None),
    422: ("invalid_request_error", None),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


def completion(reply: Reply, *, model: str, prompt_tokens: int, cached_tokens: int = 0) -> dict[str, Any]:
    """A whole `chat.completion` object for a non-streamed request."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": _call_id(), "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            for call in reply.tool_calls
        ]
    return {
        "id": _completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": reply.finish_reason}],
        "usage": usage(prompt_tokens, _reply_tokens(reply), cached_tokens),
    }


class ChunkWriter:
    """The `chat.completion.chunk` objects of one streamed completion, sharing an id."""

    def __init__(self, *, model: str) -> None:
        self.model = model
        self.id = _completion_id()
        self.created = int(time.time())

    def opening(self, reply: Reply) -> dict[str, Any]:
        """The first chunk: the assistant's role."""
        return self._chunk({"role": "assistant", "content": "" if reply.text else None})

    def text(self, text: str) -> Iterator[dict[str, Any]]:
        """`text` as several content deltas, a word or so each."""
        for piece in TEXT_PIECE.findall(text):
            yield self._chunk({"content": piece})

    def tool_calls(self, reply: Reply) -> Iterator[dict[str, Any]]:
        """Each call: a first delta with id, type and name, then its arguments in fragments."""
        for index, call in enumerate(reply.tool_calls):
            first = {
                "index": index,
                "id": _call_id(),
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            yield self._chunk({"tool_calls": [first]})
            for start in range(0, len(call.arguments), ARGUMENT_PIECE_CHARS):
                fragment = call.arguments[start : start + ARGUMENT_PIECE_CHARS]
                yield self._chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})

    def finish(self, reply: Reply) -> dict[str, Any]:
        """The last chunk of the choice: an empty delta and the finish reason."""
        return self._chunk({}, finish_reason=reply.finish_reason)

    def usage(self, reply: Reply, *, prompt_tokens: int, cached_tokens: int = 0) -> dict[str, Any]:
        """The usage chunk sent after the finish when `stream_options.include_usage` is set."""
        return {**self._envelope(), "choices": [], "usage": usage(prompt_tokens, _reply_tokens(reply), cached_tokens)}

    def _chunk(self, delta: dict[str, Any], *, finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {**self._envelope(), "choices": [choice]}

    def _envelope(self) -> dict[str, Any]:
        return {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model}


def embeddings(vectors: list[list[float]], *, model: str, base64: bool, prompt_tokens: int) -> dict[str, Any]:
    """An embeddings `list`, each vector as floats or as base64 of little-endian float32."""
    data = [
        {"object": "embedding", "index": index, "embedding": to_base64(vector) if base64 else vector}
        for index, vector in enumerate(vectors)
    ]
    return {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
    }


def models(embedding_models: tuple[str, ...]) -> dict[str, Any]:
    """The models this server answers as."""
    return {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": 0, "owned_by": "offline-coach"}
            for name in (CHAT_MODEL, *embedding_models)
        ],
    }


def to_base64(vector: list[float]) -> str:
    """The OpenAI wire form of an embedding when `encoding_format="base64"`: little-endian float32."""
    packed = array.array("f", vector)
    if packed.itemsize != 4:  # pragma: no cover - every platform Python supports has 4-byte floats
        raise RuntimeError("float32 arrays are not 4 bytes wide here")
    if array.array("H", [1]).tobytes()[0] != 1:  # pragma: no cover - big-endian machines
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode("ascii")


def error(status: int, message: str) -> dict[str, Any]:
    """An OpenAI-shaped error body for an HTTP status."""
    kind, code = ERROR_TYPES.get(status, ("server_error" if status >= 500 else "invalid_request_error", None))
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> dict[str, Any]:
    """Token counts in the shape of a completion's `usage`, the cached ones as OpenAI says."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
    }


def count_tokens(text: str) -> int:
    """A rough token count: words and punctuation marks."""
    return len(TOKEN.findall(text))


def tokens(text: str) -> list[str]:
    """The tokens count_tokens counts."""
    return TOKEN.findall(text)


def request_tokens(body: dict[str, Any], text_of: Callable[[dict[str, Any]], str]) -> list[str]:
    """A chat request's prompt as a provider renders it: the tool schemas first, then each
    message's text (`text_of`), so a prefix cache sees the tools as part of the prefix."""
    schemas = tokens(json.dumps(body.get("tools") or [], sort_keys=True)) if body.get("tools") else []
    return schemas + [token for message in body["messages"] for token in tokens(text_of(message))]


def _reply_tokens(reply: Reply) -> int:
    return count_tokens(reply.text or "") + sum(count_tokens(call.name + call.arguments) for call in reply.tool_calls)


def _completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"
