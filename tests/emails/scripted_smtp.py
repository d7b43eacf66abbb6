"""An SMTP server of the tests' own, on raw sockets, each connection answered by a script:
a greeting that never comes, a refusal at RCPT, an RCPT held until the client goes away
(a worker killed mid-send), or a reply to the end of DATA that comes late.

It keeps the bytes of every message whose end of data (the final ".") it received: what
a real server would have queued by then, whatever its client did afterwards. So a test
counts what the server got, never what the app says it sent.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, BinaryIO

from tests.sockets import SocketServer

WAIT_SECONDS = 30.0
# However long a script waits, the server's side of a connection gives up after this.
SERVER_IDLE_SECONDS = 120.0
MESSAGE_ID = re.compile(rb"^Message-ID:\s*(<[^>\r\n]+>)", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class Script:
    """How one connection is answered; every field left alone is a server that works."""

    greeting_delay: float = 0.0
    # No greeting until the test sets this: a server slow for exactly as long as it needs.
    greeting_after: threading.Event | None = None
    rcpt_reply: str = "250 2.1.5 OK"
    # RCPT gets no answer at all: the server waits until the client hangs up.
    hold_at_rcpt: bool = False
    end_of_data_delay: float = 0.0
    end_of_data_reply: str = "250 2.0.0 OK: queued"


class ScriptedSmtpServer(SocketServer):
    def __init__(self, port: int | None = None) -> None:
        super().__init__(port)
        # Set while a connection scripted with hold_at_rcpt waits for its client to go.
        self.held = threading.Event()
        self._scripts: deque[Script] = deque()
        self._received: list[bytes] = []
        self._connections = 0
        self._closed = 0
        self._condition = threading.Condition()

    @property
    def mailer(self) -> dict[str, Any]:
        """A MAILERS entry that sends here, with Django's SMTP backend's own timeout short."""
        return {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": {"host": "127.0.0.1", "port": self.port, "timeout": 1},
        }

    def script(self, *scripts: Script) -> None:
        """The next connections are answered so, in order; then every one works."""
        with self._condition:
            self._scripts.extend(scripts)

    # What came in -----------------------------------------------------------------------

    @property
    def received(self) -> list[bytes]:
        """Every message whose end of data came in, byte for byte as it came."""
        with self._condition:
            return list(self._received)

    @property
    def message_ids(self) -> list[str]:
        """The Message-ID header of each message received, in the order they came."""
        ids = []
        for raw in self.received:
            head = raw.split(b"\r\n\r\n", 1)[0]
            found = MESSAGE_ID.search(head)
            ids.append(found.group(1).decode() if found else "")
        return ids

    @property
    def connections(self) -> int:
        with self._condition:
            return self._connections

    def wait_for_messages(self, count: int, timeout: float = WAIT_SECONDS) -> list[bytes]:
        with self._condition:
            arrived = self._condition.wait_for(lambda: len(self._received) >= count, timeout)
            assert arrived, f"{count} message(s) expected within {timeout} s, {len(self._received)} arrived"
            return list(self._received)

    def wait_for_closed(self, count: int, timeout: float = WAIT_SECONDS) -> None:
        """Until `count` connections have ended, whoever hung up."""
        with self._condition:
            ended = self._condition.wait_for(lambda: self._closed >= count, timeout)
            assert ended, f"{count} connection(s) expected to end within {timeout} s, {self._closed} did"

    def wait_for_connections(self, count: int, timeout: float = WAIT_SECONDS) -> None:
        with self._condition:
            came = self._condition.wait_for(lambda: self._connections >= count, timeout)
            assert came, f"{count} connection(s) expected within {timeout} s, {self._connections} came"

    # Serving ----------------------------------------------------------------------------

    def connected(self, client: socket.socket) -> Callable[[], None]:
        with self._condition:
            self._connections += 1
            script = self._scripts.popleft() if self._scripts else Script()
            self._condition.notify_all()
        return partial(self._serve, client, script)

    def _serve(self, client: socket.socket, script: Script) -> None:
        client.settimeout(SERVER_IDLE_SECONDS)
        try:
            with client, client.makefile("rb") as lines:
                time.sleep(script.greeting_delay)
                if script.greeting_after is not None:
                    script.greeting_after.wait(SERVER_IDLE_SECONDS)
                _say(client, "220 scripted.test ESMTP")
                self._converse(client, lines, script)
        except OSError:
            # The client went away (timed out, killed): what came before the end of
            # data is dropped, as a real server drops it.
            return
        finally:
            with self._condition:
                self._closed += 1
                self._condition.notify_all()

    def _converse(self, client: socket.socket, lines: BinaryIO, script: Script) -> None:
        while line := lines.readline():
            verb = line[:4].upper()
            if verb in (b"EHLO", b"HELO"):
                _say(client, "250-scripted.test\r\n250 8BITMIME" if verb == b"EHLO" else "250 scripted.test")
            elif verb == b"RCPT" and script.hold_at_rcpt:
                self.held.set()
                while lines.readline():
                    pass
                return
            elif verb == b"RCPT":
                _say(client, script.rcpt_reply)
            elif verb == b"DATA":
                _say(client, "354 End data with <CR><LF>.<CR><LF>")
                self._take_message(lines)
                time.sleep(script.end_of_data_delay)
                _say(client, script.end_of_data_reply)
            elif verb == b"QUIT":
                _say(client, "221 2.0.0 Bye")
                return
            else:
                # MAIL, RSET, NOOP: nothing to script there.
                _say(client, "250 2.0.0 OK")

    def _take_message(self, lines: BinaryIO) -> None:
        raw = bytearray()
        while (line := lines.readline()) != b".\r\n":
            if not line:
                raise ConnectionResetError("the client went away in the middle of the message")
            raw += line[1:] if line.startswith(b"..") else line
        with self._condition:
            self._received.append(bytes(raw))
            self._condition.notify_all()


def _say(client: socket.socket, reply: str) -> None:
    client.sendall(reply.encode() + b"\r\n")
