"""A TCP server of the tests' own, on raw sockets: each connection served on a thread of
its own, and every one still open closed when the server stops (a server going away)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from typing import Self

from tests.processes import free_port


class SocketServer:
    """Listens on 127.0.0.1:`port` (a free one unless given); `connected` says how each new
    connection is served, on a thread of its own."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self._listener: socket.socket | None = None
        self._open: list[socket.socket] = []
        self._open_lock = threading.Lock()

    def connected(self, client: socket.socket) -> Callable[[], None]:
        """What serves `client`, run on a thread of its own."""
        raise NotImplementedError

    def start(self) -> Self:
        listener = socket.create_server(("127.0.0.1", self.port), reuse_port=False)
        listener.settimeout(0.2)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def stop(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        with self._open_lock:
            clients, self._open = self._open, []
        for client in clients:
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)
            client.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _accept(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._open_lock:
                self._open.append(client)
            threading.Thread(target=self.connected(client), daemon=True).start()
