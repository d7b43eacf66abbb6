"""The offline coach's HTTP server: an OpenAI-compatible API on the standard library.

One thread per connection, so a slow or delayed stream never holds up another. Every
response closes its connection: a stopped server must not keep answering on a client's
pooled keep-alive socket. Streams use chunked transfer encoding, so a scripted drop (a
stream cut off mid-way) reads as a broken response to the client, not a short one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC, date, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from offline_coach import minilm, wire
from offline_coach.bag_of_words import MODEL_NAME as BAG_OF_WORDS
from offline_coach.bag_of_words import bag_of_words_embedding
from offline_coach.brain import respond
from offline_coach.prefix_cache import PrefixCache
from offline_coach.prompt import system_text, text_of
from offline_coach.reply import Reply, ToolCall
from offline_coach.script import Answer, Drop, Failure, RawStream, RecordedRequest, Script, Scripted

logger = logging.getLogger(__name__)

READ_TIMEOUT_SECONDS = 30.0
LISTEN_BACKLOG = 256
POLL_INTERVAL_SECONDS = 0.05
SCRIPTED_FAILURE = "The offline coach was scripted to fail this request."
CHAT_PATH = "/v1/chat/completions"
EMBEDDINGS_PATH = "/v1/embeddings"
MODELS_PATH = "/v1/models"
# The embedding models it serves: the real one, and the bag of words tests control exactly.
EMBEDDING_MODELS = (minilm.MODEL_NAME, BAG_OF_WORDS)


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
    ) -> None:
        self.scripted = scripted
        # A slow embedding provider, for tests of what waits on one.
        self.embedding_delay_seconds = embedding_delay_seconds
        self.host = host
        self.port = port
        self.chunk_delay_seconds = chunk_delay_seconds
        self.today = today
        self._script = Script()
        # What it answered lately, to say what a prefix-caching server would read from cache.
        self.prefix_cache = PrefixCache()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # Running -------------------------------------------------------------------------

    def start(self) -> Self:
        """Listen and serve from a background thread; returns once the socket is listening."""
        if self._httpd is not None:
            raise RuntimeError("the offline coach is already running")
        self._httpd = _HTTPServer((self.host, self.port), self)
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
        """Forget queued answers, embedding overrides, recorded requests and cached prefixes."""
        self._script.clear()
        self.prefix_cache.forget()

    def queue_text(self, text: str, *, delay_seconds: float = 0.0, chunk_delay_seconds: float = 0.0) -> None:
        """The next chat completion answers `text`, after `delay_seconds`, streamed with `chunk_delay_seconds`."""
        self._queue(Answer(Reply(text=text), delay_seconds, chunk_delay_seconds))

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


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # 100+ clients may connect at once; the default backlog of 5 would make some wait.
    request_queue_size = LISTEN_BACKLOG

    def __init__(self, address: tuple[str, int], coach: ModelServer) -> None:
        super().__init__(address, _Handler)
        self.coach = coach
        # Connections kept open for their client's next request, as an OpenAI-compatible
        # server keeps them: a client pays for a connection once, not for every request.
        self._idle: set[socket.socket] = set()
        self._idle_lock = threading.Lock()

    def connection_idle(self, connection: socket.socket, idle: bool) -> None:
        with self._idle_lock:
            if idle:
                self._idle.add(connection)
            else:
                self._idle.discard(connection)

    def close_idle_connections(self) -> None:
        """End the connections waiting for another request: a stopped server answers nothing."""
        with self._idle_lock:
            idle, self._idle = self._idle, set()
        for connection in idle:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: object, client_address: object) -> None:
        # A client that hangs up mid-stream is routine, not an error worth a traceback on stderr.
        logger.debug("offline coach: connection from %s ended early", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"
    server_version = "OfflineCoach/1.0"
    # Headers and body go out as separate writes; on a connection kept open, Nagle's
    # algorithm would hold the body until the client acknowledged the headers (40 ms).
    disable_nagle_algorithm = True
    timeout = READ_TIMEOUT_SECONDS

    def setup(self) -> None:
        super().setup()
        self.server.connection_idle(self.connection, True)

    def finish(self) -> None:
        self.server.connection_idle(self.connection, False)
        super().finish()

    def handle_one_request(self) -> None:
        # Idle while it waits for the request line; busy from then until the answer is out.
        try:
            super().handle_one_request()
        finally:
            self.server.connection_idle(self.connection, not self.close_connection)

    def parse_request(self) -> bool:
        self.server.connection_idle(self.connection, False)
        return super().parse_request()

    def do_GET(self) -> None:
        if self._path() == MODELS_PATH:
            self.server.coach.record("GET", MODELS_PATH, {})
            self._send_json(200, wire.models(EMBEDDING_MODELS))
        else:
            self._send_error(404, f"Unknown path: GET {self.path}")

    def do_POST(self) -> None:
        path = self._path()
        if path not in {CHAT_PATH, EMBEDDINGS_PATH}:
            self._send_error(404, f"Unknown path: POST {self.path}")
            return
        body = self._read_json()
        if body is None:
            return
        self.server.coach.record("POST", path, body)
        if path == CHAT_PATH:
            self._chat(body)
        else:
            self._embeddings(body)

    def do_PUT(self) -> None:
        self._send_error(405, f"Method not allowed: {self.command}")

    do_DELETE = do_PATCH = do_PUT

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("offline coach: " + format, *args)

    # Chat completions ----------------------------------------------------------------

    def _chat(self, body: dict[str, Any]) -> None:
        messages = body.get("messages")
        if not isinstance(messages, list) or not all(isinstance(message, dict) for message in messages):
            self._send_error(400, "'messages' is required and must be a list of message objects.")
            return
        model = str(body.get("model") or wire.CHAT_MODEL)
        stream = bool(body.get("stream"))
        try:
            answer = self.server.coach.answer_for(body)
        except Exception:
            # The rule-based coach reads free text; if it trips, the client gets an error, not a hang-up.
            logger.exception("offline coach: could not answer a chat completion")
            self._send_error(500, "The offline coach could not answer this request.")
            return
        match answer:
            case Failure(status, message, delay_seconds):
                time.sleep(delay_seconds)
                self._send_error(status, message)
            case Drop(text):
                self._drop(text, model=model, stream=stream)
            case RawStream(events, chunk_delay_seconds):
                # A provider's stream replayed as it was captured, whatever it holds.
                self._start_event_stream(keep_open=False)
                for index, event in enumerate(events):
                    if index and chunk_delay_seconds:
                        time.sleep(chunk_delay_seconds)
                    self._send_event(event)
                self.wfile.write(b"0\r\n\r\n")
            case Answer(reply, delay_seconds, chunk_delay_seconds):
                time.sleep(delay_seconds)
                sent = wire.request_tokens(body, text_of)
                prompt_tokens, cached = len(sent), self.server.coach.prefix_cache.read(sent)
                if stream:
                    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                    self._stream(
                        reply,
                        model=model,
                        chunk_delay_seconds=chunk_delay_seconds,
                        usage=(prompt_tokens, cached) if include_usage else None,
                    )
                else:
                    completion = wire.completion(reply, model=model, prompt_tokens=prompt_tokens, cached_tokens=cached)
                    self._send_json(200, completion)

    def _stream(self, reply: Reply, *, model: str, chunk_delay_seconds: float, usage: tuple[int, int] | None) -> None:
        writer = wire.ChunkWriter(model=model)
        chunks = [
            writer.opening(reply),
            *writer.text(reply.text or ""),
            *writer.tool_calls(reply),
            writer.finish(reply),
        ]
        if usage is not None:
            prompt_tokens, cached = usage
            chunks.append(writer.usage(reply, prompt_tokens=prompt_tokens, cached_tokens=cached))
        self._start_event_stream()
        for index, chunk in enumerate(chunks):
            if index and chunk_delay_seconds:
                time.sleep(chunk_delay_seconds)
            self._send_event(json.dumps(chunk))
        self._send_event("[DONE]")
        self.wfile.write(b"0\r\n\r\n")

    def _drop(self, text: str, *, model: str, stream: bool) -> None:
        # The response stops short of what its framing promised; the server then closes the
        # socket, so the client's HTTP library reports a broken response.
        if stream:
            writer = wire.ChunkWriter(model=model)
            reply = Reply(text=text)
            self._start_event_stream(keep_open=False)
            for chunk in [writer.opening(reply), *writer.text(text)]:
                self._send_event(json.dumps(chunk))
            return
        data = json.dumps(wire.completion(Reply(text=text), model=model, prompt_tokens=0)).encode()
        self._send_head(200, "application/json", length=len(data), keep_open=False)
        self.wfile.write(data[: len(data) // 2])

    # Embeddings ----------------------------------------------------------------------

    def _embeddings(self, body: dict[str, Any]) -> None:
        coach = self.server.coach
        if failure := coach.embedding_failure():
            self._send_error(failure.status, failure.message)
            return
        if (raw := coach.raw_embeddings_body()) is not None:
            data = raw.encode()
            self._send_head(200, "application/json", length=len(data))
            self.wfile.write(data)
            return
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not texts or not all(isinstance(text, str) for text in texts):
            self._send_error(400, "'input' must be a string or a non-empty list of strings (no token arrays).")
            return
        encoding = body.get("encoding_format") or "float"
        if encoding not in {"float", "base64"}:
            self._send_error(400, "'encoding_format' must be 'float' or 'base64'.")
            return
        model = str(body.get("model") or "")
        if model not in EMBEDDING_MODELS:
            self._send_error(404, f"The model {model!r} does not exist here; embed with one of {EMBEDDING_MODELS}.")
            return
        if coach.embedding_delay_seconds:
            time.sleep(coach.embedding_delay_seconds)
        try:
            vectors = coach.embeddings_for(texts, model)
        except minilm.MiniLMUnavailableError as error:
            self._send_error(503, str(error))
            return
        payload = wire.embeddings(
            vectors,
            model=model,
            base64=encoding == "base64",
            prompt_tokens=sum(wire.count_tokens(text) for text in texts),
        )
        self._send_json(200, payload)

    # HTTP ----------------------------------------------------------------------------

    def _path(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/")

    def _read_json(self) -> dict[str, Any] | None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"null")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._send_error(400, "The request body must be a JSON object.")
            return None
        return body

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self._send_head(status, "application/json", length=len(data))
        self.wfile.write(data)

    def _send_error(self, status: int, message: str) -> None:
        self._send_json(status, wire.error(status, message))

    def _send_head(self, status: int, content_type: str, *, length: int | None = None, keep_open: bool = True) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if length is None:
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Cache-Control", "no-cache")
        else:
            self.send_header("Content-Length", str(length))
        if not keep_open:
            # Its framing will not hold: the connection ends with the response.
            self.close_connection = True
            self.send_header("Connection", "close")
        self.end_headers()

    def _start_event_stream(self, *, keep_open: bool = True) -> None:
        self._send_head(200, "text/event-stream; charset=utf-8", keep_open=keep_open)

    def _send_event(self, data: str) -> None:
        event = f"data: {data}\n\n".encode()
        self.wfile.write(f"{len(event):X}\r\n".encode() + event + b"\r\n")
