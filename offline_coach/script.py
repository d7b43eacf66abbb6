"""What a test scripts: the answers the next requests get, and the requests that came in."""

from __future__ import annotations

import copy
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from offline_coach.reply import Reply


@dataclass(frozen=True, eq=False)
class Pause:
    """A test's hold on a scripted stream: once `after_chunks` chunks are sent, `reached` is
    set and the rest waits for `release`. The reply is then being written for exactly as
    long as the test needs, however slow the machine: no clock decides it."""

    after_chunks: int = 2
    reached: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class Answer:
    """A scripted reply, after `delay_seconds`, streamed with `chunk_delay_seconds` between
    chunks, and held mid-way by `pause` if one is given."""

    reply: Reply
    delay_seconds: float = 0.0
    chunk_delay_seconds: float = 0.0
    pause: Pause | None = None


@dataclass(frozen=True)
class Failure:
    """A scripted HTTP error, after `delay_seconds`."""

    status: int
    message: str
    delay_seconds: float = 0.0


@dataclass(frozen=True)
class Drop:
    """A response that sends `text` and then breaks off: no finish reason, no [DONE]."""

    text: str


@dataclass(frozen=True)
class RawStream:
    """A stream sent exactly as given: each item is the payload of one `data:` event, in
    order, with nothing added (no [DONE] unless it is one of the items). For replaying what
    a real provider sends."""

    events: tuple[str, ...]
    chunk_delay_seconds: float = 0.0


Scripted = Answer | Failure | Drop | RawStream


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received: method, path and parsed JSON body (a private copy)."""

    method: str
    path: str
    body: dict[str, Any]


class Script:
    """Thread-safe queues of scripted answers, embedding overrides and the request log."""

    def __init__(self) -> None:
        # Handlers run on one thread per connection; every field is read and written under this.
        self._lock = threading.Lock()
        self._chat: deque[Scripted] = deque()
        self._embedding_failures: deque[Failure] = deque()
        self._embedding_bodies: deque[str] = deque()
        self._vectors: dict[str, list[float]] = {}
        self._requests: list[RecordedRequest] = []

    def add_chat(self, item: Scripted) -> None:
        """Queue what the next chat completion request gets."""
        with self._lock:
            self._chat.append(item)

    def next_chat(self) -> Scripted | None:
        """The next scripted chat answer, or None when the queue is empty."""
        with self._lock:
            return self._chat.popleft() if self._chat else None

    def add_embedding_failure(self, failure: Failure) -> None:
        """Make the next embeddings request fail."""
        with self._lock:
            self._embedding_failures.append(failure)

    def next_embedding_failure(self) -> Failure | None:
        """The next scripted embeddings failure, or None."""
        with self._lock:
            return self._embedding_failures.popleft() if self._embedding_failures else None

    def add_embedding_body(self, body: str) -> None:
        """Answer the next embeddings request with exactly this JSON text."""
        with self._lock:
            self._embedding_bodies.append(body)

    def next_embedding_body(self) -> str | None:
        """The next scripted raw embeddings body, or None."""
        with self._lock:
            return self._embedding_bodies.popleft() if self._embedding_bodies else None

    def set_vector(self, text: str, vector: list[float]) -> None:
        """Answer exactly `text` with `vector`."""
        with self._lock:
            self._vectors[text] = list(vector)

    def vector_for(self, text: str) -> list[float] | None:
        """The override for exactly `text`, if one was set."""
        with self._lock:
            vector = self._vectors.get(text)
            return list(vector) if vector is not None else None

    def record(self, method: str, path: str, body: dict[str, Any]) -> None:
        """Log a request."""
        with self._lock:
            self._requests.append(RecordedRequest(method, path, copy.deepcopy(body)))

    def requests(self) -> list[RecordedRequest]:
        """Every logged request, in order."""
        with self._lock:
            return list(self._requests)

    def clear(self) -> None:
        """Forget queues, overrides and the log."""
        with self._lock:
            self._chat.clear()
            self._embedding_failures.clear()
            self._embedding_bodies.clear()
            self._vectors.clear()
            self._requests.clear()
