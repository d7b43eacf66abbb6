"""The offline coach: an OpenAI-compatible server for running the app without a key."""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand

from coach.offline import ModelServer

# A short pause between streamed words, so the chat visibly types as a real model does.
CHUNK_DELAY_SECONDS = 0.03


class Command(BaseCommand):
    help = "Serve the offline coach (the model the app uses without OPENAI_API_KEY) until SIGTERM or Ctrl-C."
    # It never touches the database, so it skips the checks that might.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--port", type=int, default=8001)
        parser.add_argument("--host", default="127.0.0.1")

    def handle(self, *args: Any, port: int, host: str, **options: Any) -> None:
        stop = threading.Event()
        # The run command stops its children with SIGTERM; Ctrl-C does the same when run alone.
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        server = ModelServer(host=host, port=port, chunk_delay_seconds=CHUNK_DELAY_SECONDS).start()
        try:
            self.stdout.write(f"offline coach: serving {server.base_url}")
            # The run command reads this line through a pipe: send it now, not at exit.
            self.stdout.flush()
            stop.wait()
        finally:
            server.stop()
