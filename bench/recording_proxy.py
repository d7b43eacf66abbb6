"""A pass-through to an OpenAI-compatible server that keeps a copy of every request body,
so a benchmark can read exactly what the app sent (the system prompt, the notes, the tool
results of each round) whichever server answers. Responses, streamed or not, go back
chunk by chunk as they arrive. Standard library only."""

from __future__ import annotations

import http.client
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

# Headers that belong to one connection, not to the request passed on.
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "host", "content-length"})
CHUNK_BYTES = 4096
UPSTREAM_TIMEOUT_SECONDS = 3600.0


class RecordingProxy:
    """Serves on 127.0.0.1:`port` (0 for a free one), forwarding to `upstream` (a /v1 URL)."""

    def __init__(self, upstream: str, port: int = 0) -> None:
        self.upstream = urlsplit(upstream.rstrip("/"))
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, name="recording-proxy", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> RecordingProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def chat_requests_since(self, count: int) -> list[dict[str, Any]]:
        """The chat completion bodies received after the first `count` requests of any kind."""
        with self._lock:
            return [body for path, body in self.requests[count:] if path.endswith("/chat/completions")]

    def __len__(self) -> int:
        with self._lock:
            return len(self.requests)

    def _record(self, path: str, body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append((path, body))

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                suffix = self.path.split("/v1", 1)[-1]
                try:
                    proxy._record(suffix, json.loads(raw or b"{}"))
                except ValueError:
                    proxy._record(suffix, {"unreadable": raw.decode(errors="replace")})
                self._forward("POST", suffix, raw)

            def do_GET(self) -> None:
                self._forward("GET", self.path.split("/v1", 1)[-1], b"")

            def _forward(self, method: str, suffix: str, raw: bytes) -> None:
                upstream = proxy.upstream
                secure = upstream.scheme == "https"
                kind = http.client.HTTPSConnection if secure else http.client.HTTPConnection
                connection = kind(upstream.netloc, timeout=UPSTREAM_TIMEOUT_SECONDS)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                connection.request(method, upstream.path + suffix, body=raw or None, headers=headers)
                response = connection.getresponse()
                self.send_response(response.status)
                for name, value in response.getheaders():
                    if name.lower() not in _HOP_BY_HOP:
                        self.send_header(name, value)
                self.send_header("Connection", "close")
                self.end_headers()
                while chunk := response.read1(CHUNK_BYTES):
                    self.wfile.write(chunk)
                    self.wfile.flush()
                connection.close()
                self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
