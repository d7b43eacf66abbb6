"""The offline coach as a server: an OpenAI-compatible API on the standard library, started
and stopped by the app's run command, the tests and the benchmarks.

`ModelServer` is what they hold: the rule-based coach answers, and in scripted mode a test
queues what the next requests get and reads back what was asked. The HTTP side (threads,
connections, streams) is offline_coach/handler.py.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
from collections.abc import Callable, Collection
from datetime import UTC, date, datetime
from typing import Any, Self

from offline_coach import minilm
from offline_coach.bag_of_words import bag_of_words_embedding
from offline_coach.brain import respond
from offline_coach.handler import CoachHTTPServer
from offline_coach.prefix_cache import PrefixCache
from offline_coach.prompt import system_text
from offline_coach.quirks import as_served, checked
from offline_coach.reply import Reply, ToolCall
from offline_coach.routes import CHAT_PATH, EMBEDDINGS_PATH
from offline_coach.script import Answer, Drop, Failure, Pause, RawStream, RecordedRequest, Script, Scripted

logger = logging.getLogger(__name__)

POLL_INTERVAL_SECONDS = 0.05
SCRIPTED_FAILURE = "The offline coach was scripted to fail this request."


def _utc_today() -> date:
    return datetime.now(UTC).date()


class ModelServer:
    """An OpenAI-compatible model server: the rule-based coach, optionally scripted by tests.

    Normal mode answers every request with the rule-based coach. Scripted mode also
    records every request and lets a test queue what the next requests get; once the
    queue is empty the rule-based coach answers again. All methods are thread-safe.
    """

    def __init__(
        self,
        scripted: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        chunk_delay_seconds: float = 0.0,
        embedding_delay_seconds: float = 0.0,
        today: Callable[[], date] = _utc_today,
        quirks: Collection[str] = (),
        identity_token: str = "",
    ) -> None:
        self.scripted = scripted
        # Ways of a real server's it takes on (offline_coach/quirks.py), none by default.
        self.quirks = checked(quirks)
        # A slow embedding provider, for tests of what waits on one.
        self.embedding_delay_seconds = embedding_delay_seconds
        # The run command's token for this run: with it, the server proves it is the
        # offline coach the app expects, and not some other process on its port.
        self.identity_token = identity_token
        self.host = host
        self.port = port
        self.chunk_delay_seconds = chunk_delay_seconds
        self.today = today
        self._script = Script()
        # What it answered lately, to say what a prefix-caching server would read from cache.
        self.prefix_cache = PrefixCache()
        # Pauses handed out, let go at reset: a test that ends without releasing its own
        # leaves no stream of this long-lived server waiting.
        self._pauses: list[Pause] = []
        self._httpd: CoachHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # Running -------------------------------------------------------------------------

    def start(self) -> Self:
        """Listen and serve from a background thread; returns once the socket is listening."""
        if self._httpd is not None:
            raise RuntimeError("the offline coach is already running")
        self._httpd = CoachHTTPServer((self.host, self.port), self)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": POLL_INTERVAL_SECONDS},
            name=f"offline-coach:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting connections and close the socket, and the connections kept open
        between requests. Responses under way run out on their own."""
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        self._httpd.close_idle_connections()
        if self._thread is not None:
            self._thread.join()
        self._httpd = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """The OpenAI base URL of the running server, e.g. http://127.0.0.1:8001/v1."""
        if self._httpd is None:
            raise RuntimeError("the offline coach is not running: call start() first")
        return f"http://{self.host}:{self.port}/v1"

    # Scripting -----------------------------------------------------------------------

    def reset(self) -> None:
        """Forget queued answers, embedding overrides, recorded requests and cached prefixes,
        and let every paused stream go on."""
        self._script.clear()
        self.prefix_cache.forget()
        for pause in self._pauses:
            pause.release.set()
        self._pauses.clear()

    def queue_text(
        self, text: str, *, delay_seconds: float = 0.0, chunk_delay_seconds: float = 0.0, pause: Pause | None = None
    ) -> None:
        """The next chat completion answers `text`, after `delay_seconds`, streamed with
        `chunk_delay_seconds`, and held mid-way by `pause` if one is given."""
        if pause is not None:
            self._pauses.append(pause)
        self._queue(Answer(Reply(text=text), delay_seconds, chunk_delay_seconds, pause))

    def queue_tool_calls(
        self, calls: list[tuple[str, dict[str, Any] | str]], *, text: str | None = None, delay_seconds: float = 0.0
    ) -> None:
        """The next chat completion calls these functions; a string argument is sent verbatim (even malformed)."""
        tool_calls = tuple(
            ToolCall(name, arguments if isinstance(arguments, str) else json.dumps(arguments))
            for name, arguments in calls
        )
        self._queue(Answer(Reply(text=text, tool_calls=tool_calls), delay_seconds))

    def queue_error(self, status: int, message: str = SCRIPTED_FAILURE, *, delay_seconds: float = 0.0) -> None:
        """The next chat completion fails with this HTTP status and an OpenAI-shaped error body."""
        self._queue(Failure(status, message, delay_seconds))

    def queue_stream_drop(self, text_before_drop: str) -> None:
        """The next chat completion sends this text, then the connection breaks: no finish, no [DONE]."""
        self._queue(Drop(text_before_drop))

    def queue_raw_stream(self, events: list[str], *, chunk_delay_seconds: float = 0.0) -> None:
        """The next chat completion streams these `data:` payloads exactly as given, in order:
        a provider's stream replayed byte for byte (add "[DONE]" where that provider sends it)."""
        self._queue(RawStream(tuple(events), chunk_delay_seconds))

    def queue_embeddings_body(self, body: str) -> None:
        """The next embeddings request is answered 200 with exactly this JSON text."""
        self._require_scripted("queue_embeddings_body")
        self._script.add_embedding_body(body)

    def set_embedding(self, text: str, vector: list[float]) -> None:
        """Embed exactly `text` as `vector` (a stand-in for a semantic model's opinion)."""
        self._require_scripted("set_embedding")
        self._script.set_vector(text, vector)

    def queue_embedding_error(self, status: int, message: str = SCRIPTED_FAILURE) -> None:
        """The next embeddings request fails with this HTTP status."""
        self._require_scripted("queue_embedding_error")
        self._script.add_embedding_failure(Failure(status, message))

    # What came in --------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received (scripted mode), in order."""
        return self._script.requests()

    def chat_requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the chat completion requests received, in order."""
        return [request.body for request in self.requests if request.path == CHAT_PATH]

    def embedding_requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the embeddings requests received, in order."""
        return [request.body for request in self.requests if request.path == EMBEDDINGS_PATH]

    @staticmethod
    def system_prompt(body: dict[str, Any]) -> str:
        """The text of a chat request's system messages, joined: what a test asserts a turn was told."""
        return system_text(body.get("messages") or [])

    # For the request handler ---------------------------------------------------------

    def identity(self, challenge: str) -> dict[str, str] | None:
        """The proof that this is the offline coach holding the run's token: an HMAC of the
        app's fresh challenge under it, which a process without the token cannot make.
        None when it was started without one (the app then expects no proof)."""
        if not self.identity_token or not challenge:
            return None
        proof = hmac.new(self.identity_token.encode(), challenge.encode(), hashlib.sha256).hexdigest()
        return {"proof": proof}

    def served(self, body: dict[str, Any]) -> dict[str, Any] | Failure:
        """The request as this server's quirks hand it to the coach, or their refusal of it."""
        return as_served(body, self.quirks)

    def answer_for(self, body: dict[str, Any]) -> Scripted:
        """What a chat completion request gets: the next scripted item, else the rule-based coach."""
        scripted = self._script.next_chat() if self.scripted else None
        if scripted is not None:
            return scripted
        return Answer(respond(body, today=self.today()), chunk_delay_seconds=self.chunk_delay_seconds)

    def embedding_failure(self) -> Failure | None:
        """A scripted failure for this embeddings request, if one is queued."""
        return self._script.next_embedding_failure() if self.scripted else None

    def raw_embeddings_body(self) -> str | None:
        """A scripted raw body for this embeddings request, if one is queued."""
        return self._script.next_embedding_body() if self.scripted else None

    def embeddings_for(self, texts: list[str], model: str) -> list[list[float]]:
        """The vectors of `texts` from `model` (one of EMBEDDING_MODELS), in one batch; a
        test's override wins for any text it names."""
        overrides = [self._script.vector_for(text) if self.scripted else None for text in texts]
        wanted = [text for text, override in zip(texts, overrides, strict=True) if override is None]
        if not wanted:
            computed: list[list[float]] = []
        elif model == minilm.MODEL_NAME:
            computed = minilm.embed(wanted)
        else:
            computed = [bag_of_words_embedding(text) for text in wanted]
        fresh = iter(computed)
        return [override if override is not None else next(fresh) for override in overrides]

    def record(self, method: str, path: str, body: dict[str, Any]) -> None:
        """Log a request (scripted mode only: a long-running server keeps no log)."""
        if self.scripted:
            self._script.record(method, path, body)

    def _queue(self, item: Scripted) -> None:
        self._require_scripted("queueing answers")
        self._script.add_chat(item)

    def _require_scripted(self, what: str) -> None:
        if not self.scripted:
            raise RuntimeError(f"{what} needs ModelServer(scripted=True)")
