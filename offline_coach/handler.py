"""The offline coach's HTTP side: one thread per connection, so a slow or delayed stream
never holds up another; connections kept open for their client's next request, as an
OpenAI-compatible server keeps them, and closed when the server stops, so a stopped server
answers nothing on a client's pooled socket. Streams use chunked transfer encoding, so a
scripted drop (a stream cut off mid-way) reads as a broken response to the client, not a
short one. What is answered is the coach's: whatever has the `Coach` shape below
(offline_coach/server.py's ModelServer, which starts this server and so imports it; this
side names only the shape, so the two never import each other).
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from offline_coach import minilm, wire
from offline_coach.prefix_cache import PrefixCache
from offline_coach.prompt import text_of
from offline_coach.reply import Reply
from offline_coach.routes import CHAT_PATH, EMBEDDING_MODELS, EMBEDDINGS_PATH, IDENTITY_PATH, MODELS_PATH
from offline_coach.script import Answer, Drop, Failure, Pause, RawStream, Scripted

logger = logging.getLogger(__name__)

READ_TIMEOUT_SECONDS = 30.0
LISTEN_BACKLOG = 256
PAUSE_LIMIT_SECONDS = 600.0


class Coach(Protocol):
    """What the HTTP side asks of the coach it serves."""

    prefix_cache: PrefixCache
    embedding_delay_seconds: float

    def record(self, method: str, path: str, body: dict[str, Any]) -> None: ...
    def identity(self, challenge: str) -> dict[str, str] | None: ...
    def served(self, body: dict[str, Any]) -> dict[str, Any] | Failure: ...
    def answer_for(self, body: dict[str, Any]) -> Scripted: ...
    def embedding_failure(self) -> Failure | None: ...
    def raw_embeddings_body(self) -> str | None: ...
    def embeddings_for(self, texts: list[str], model: str) -> list[list[float]]: ...


class CoachHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # 100+ clients may connect at once; the default backlog of 5 would make some wait.
    request_queue_size = LISTEN_BACKLOG

    def __init__(self, address: tuple[str, int], coach: Coach) -> None:
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
    server: CoachHTTPServer
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
        elif self._path() == IDENTITY_PATH:
            challenge = parse_qs(urlsplit(self.path).query).get("challenge", [""])[0]
            if proof := self.server.coach.identity(challenge):
                self._send_json(200, proof)
            else:
                self._send_error(404, "This offline coach was started without an identity token.")
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
        served = self.server.coach.served(body)
        if isinstance(served, Failure):
            self._send_error(served.status, served.message)
            return
        body = served
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
            case Answer(reply, delay_seconds, chunk_delay_seconds, pause):
                time.sleep(delay_seconds)
                sent = wire.request_tokens(body, text_of)
                prompt_tokens, cached = len(sent), self.server.coach.prefix_cache.read(sent)
                if stream:
                    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                    self._stream(
                        reply,
                        model=model,
                        chunk_delay_seconds=chunk_delay_seconds,
                        pause=pause,
                        usage=(prompt_tokens, cached) if include_usage else None,
                    )
                else:
                    completion = wire.completion(reply, model=model, prompt_tokens=prompt_tokens, cached_tokens=cached)
                    self._send_json(200, completion)

    def _stream(
        self,
        reply: Reply,
        *,
        model: str,
        chunk_delay_seconds: float,
        pause: Pause | None,
        usage: tuple[int, int] | None,
    ) -> None:
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
            if pause is not None and index == pause.after_chunks:
                self._hold(pause)
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

    def _hold(self, pause: Pause) -> None:
        """Wait for the test to release the stream, saying every second that it is alive, as
        providers do with SSE comments (which clients skip): a held stream is a model still
        writing, not one whose connection went quiet past the client's read timeout."""
        pause.reached.set()
        # Bounded only so a test that never releases leaves no thread behind for good.
        for _ in range(int(PAUSE_LIMIT_SECONDS)):
            if pause.release.wait(1.0):
                return
            comment = b": held\n"
            self.wfile.write(f"{len(comment):X}\r\n".encode() + comment + b"\r\n")
            self.wfile.flush()

    def _send_event(self, data: str) -> None:
        event = f"data: {data}\n\n".encode()
        self.wfile.write(f"{len(event):X}\r\n".encode() + event + b"\r\n")
