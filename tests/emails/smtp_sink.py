"""A real SMTP server for tests (aiosmtpd in a thread), which keeps every message it
accepts and can be told how to answer the next ones: accept (250), refuse for now
(451), refuse for good (550), hold a message until its sender goes away (so a test
can kill a worker in the middle of sending), or until the test lets it through."""

from __future__ import annotations

import asyncio
import email
import email.policy
import threading
from collections import deque
from email.message import EmailMessage
from typing import Any, Self

from aiosmtpd.controller import Controller

from tests.processes import free_port

ACCEPT = "250 2.0.0 OK: queued"
TRY_LATER = "451 4.3.0 Mailbox busy, try again later"
REFUSE = "550 5.1.1 No such user here"
WAIT_SECONDS = 30.0
_HOLD = "hold"
_DELAY = "delay:"
_UNTIL_RELEASED = "until released"


class SmtpSink:
    def __init__(self, port: int | None = None) -> None:
        # A port of its own, or the one a stopped sink had (an SMTP server back after an outage).
        self.port = port or free_port()
        self.held = threading.Event()
        self._stopped = True
        self._accepted: list[EmailMessage] = []
        self._raw: list[bytes] = []
        self._answers: deque[str] = deque()
        self._releases: deque[threading.Event] = deque()
        self._attempts = 0
        self._condition = threading.Condition()
        # server_hostname: no DNS lookup of this machine's name at start.
        self._controller = Controller(self, hostname="127.0.0.1", port=self.port, server_hostname="sink.test")

    def start(self) -> Self:
        self._stopped = False
        self._controller.start()
        return self

    def stop(self) -> None:
        """Stop listening (an SMTP outage); stopping a stopped sink does nothing."""
        if not self._stopped:
            self._controller.stop()
            self._stopped = True

    @property
    def mailer(self) -> dict[str, Any]:
        """A MAILERS entry that sends here."""
        return {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": {"host": "127.0.0.1", "port": self.port, "timeout": 10},
        }

    # Scripting -------------------------------------------------------------------------

    def answer_next(self, *replies: str) -> None:
        """The next messages get these replies, in order; then every message is accepted."""
        with self._condition:
            self._answers.extend(replies)

    def delay_next(self, seconds: float) -> None:
        """The next message is accepted, but only after `seconds` (a slow server), and
        `held` is set while it waits."""
        with self._condition:
            self._answers.append(f"{_DELAY}{seconds}")

    def hold_next_until(self, release: threading.Event) -> None:
        """The next message is accepted once `release` is set, however long that takes (a
        server slow for exactly as long as a test needs), and `held` is set while it waits."""
        with self._condition:
            self._releases.append(release)
            self._answers.append(_UNTIL_RELEASED)

    def hold_next(self) -> None:
        """The next message is neither accepted nor refused: the server waits until the
        client disconnects (a killed worker), and `held` is set while it waits."""
        with self._condition:
            self._answers.append(_HOLD)

    # What came in ----------------------------------------------------------------------

    @property
    def messages(self) -> list[EmailMessage]:
        with self._condition:
            return list(self._accepted)

    @property
    def raw(self) -> list[bytes]:
        """The accepted messages exactly as the server received them, byte for byte."""
        with self._condition:
            return list(self._raw)

    @property
    def attempts(self) -> int:
        """Messages offered to the server, whatever it answered."""
        with self._condition:
            return self._attempts

    def wait_for_messages(self, count: int, timeout: float = WAIT_SECONDS) -> list[EmailMessage]:
        with self._condition:
            arrived = self._condition.wait_for(lambda: len(self._accepted) >= count, timeout)
            assert arrived, f"{count} message(s) expected within {timeout} s, {len(self._accepted)} arrived"
            return list(self._accepted)

    def wait_for_attempts(self, count: int, timeout: float = WAIT_SECONDS) -> None:
        with self._condition:
            offered = self._condition.wait_for(lambda: self._attempts >= count, timeout)
            assert offered, f"{count} attempt(s) expected within {timeout} s, {self._attempts} came"

    # aiosmtpd calls this for each message -----------------------------------------------

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        with self._condition:
            self._attempts += 1
            answer = self._answers.popleft() if self._answers else ACCEPT
            self._condition.notify_all()
        if answer == _HOLD:
            self.held.set()
            # Cancelled by aiosmtpd when the client's connection drops.
            await asyncio.Event().wait()
        if answer == _UNTIL_RELEASED:
            with self._condition:
                release = self._releases.popleft()
            self.held.set()
            while not release.is_set():
                await asyncio.sleep(0.05)
            answer = ACCEPT
        if answer.startswith(_DELAY):
            self.held.set()
            await asyncio.sleep(float(answer.removeprefix(_DELAY)))
            answer = ACCEPT
        if answer.startswith("250"):
            message = email.message_from_bytes(envelope.content, policy=email.policy.default)
            assert isinstance(message, EmailMessage)
            with self._condition:
                self._accepted.append(message)
                self._raw.append(envelope.content)
                self._condition.notify_all()
        return answer
