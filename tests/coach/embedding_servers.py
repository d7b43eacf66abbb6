"""Embedding servers that misbehave, over real sockets: one that takes each connection and
never answers (a server that hangs), and one that answers, correctly, only after a pause
(a slow one). Each counts the requests it was sent, so a test knows what the app asked."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from functools import partial

from offline_coach.bag_of_words import bag_of_words_embedding
from tests.sockets import SocketServer


class EmbeddingServer(SocketServer):
    """Answers POST /v1/embeddings with bag-of-words vectors after `delay_seconds`; with
    `delay_seconds=None`, never: it reads the request and holds the connection open."""

    def __init__(self, *, delay_seconds: float | None) -> None:
        super().__init__()
        self.delay_seconds = delay_seconds
        self.requests = 0
        # Set once an answer went out (a slow server's), or the client gave up on one.
        self.answered = threading.Event()
        self.given_up_on = threading.Event()
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def connected(self, client: socket.socket) -> Callable[[], None]:
        return partial(self._serve, client)

    def _serve(self, client: socket.socket) -> None:
        try:
            texts = self._read_request(client)
            with self._lock:
                self.requests += 1
            if self.delay_seconds is None:
                # Hang: wait for the client to give up and close its end.
                while client.recv(4096):
                    pass
                self.given_up_on.set()
                return
            time.sleep(self.delay_seconds)
            vectors = [{"index": n, "embedding": bag_of_words_embedding(text)} for n, text in enumerate(texts)]
            body = json.dumps({"object": "list", "data": vectors, "model": "bag-of-words"}).encode()
            head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            client.sendall(head.encode() + b"Connection: close\r\n\r\n" + body)
            self.answered.set()
        except OSError:
            self.given_up_on.set()
        finally:
            client.close()

    @staticmethod
    def _read_request(client: socket.socket) -> list[str]:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = client.recv(4096)
            if not chunk:
                raise ConnectionResetError("the client went away before its request was whole")
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
        )
        while len(body) < length:
            body += client.recv(4096)
        texts = json.loads(body)["input"]
        return [texts] if isinstance(texts, str) else list(texts)
