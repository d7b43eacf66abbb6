"""The person's mailbox: a real SMTP server the app sends to, which notes when (on the
simulated clock) each message arrived."""

from __future__ import annotations

import email
import email.policy
import socket
import threading
from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage
from typing import Any, Self

from aiosmtpd.controller import Controller
from django.utils import timezone


@dataclass(frozen=True)
class Received:
    at: datetime
    message_id: str
    subject: str
    unsubscribe_url: str


class Mailbox:
    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.received: list[Received] = []
        self._lock = threading.Lock()
        # server_hostname: no DNS lookup of this machine's name at start.
        self._controller = Controller(self, hostname="127.0.0.1", port=self.port, server_hostname="mailbox.bench")

    def start(self) -> Self:
        self._controller.start()
        return self

    def stop(self) -> None:
        self._controller.stop()

    @property
    def mailer(self) -> dict[str, Any]:
        """A MAILERS entry that sends here."""
        return {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": {"host": "127.0.0.1", "port": self.port, "timeout": 10},
        }

    async def handle_DATA(
        self, server: object, session: object, envelope: Any
    ) -> str:  # aiosmtpd calls it by this name
        message: EmailMessage = email.message_from_bytes(envelope.content, policy=email.policy.default)
        unsubscribe = str(message.get("List-Unsubscribe", "")).strip().strip("<>")
        with self._lock:
            self.received.append(
                Received(
                    # The app's clock is the simulated one: the time it arrived in the person's life.
                    at=timezone.now(),
                    message_id=str(message.get("Message-ID", "")).strip(),
                    subject=str(message.get("Subject", "")),
                    unsubscribe_url=unsubscribe,
                )
            )
        return "250 2.0.0 OK: queued"
