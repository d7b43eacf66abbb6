"""`manage.py offline_coach`: start the offline coach, the model the app uses without a key.

The offline coach is a separate server and package (`python -m offline_coach`) that the
app never imports; this command only hands the process over to it.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Serve the offline coach (the model the app uses without OPENAI_API_KEY) until SIGTERM or Ctrl-C."
    # It never touches the database, so it skips the checks that might.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default=None)
        parser.add_argument("--port", type=int, default=None)

    def handle(self, *args: Any, host: str | None, port: int | None, **options: Any) -> None:
        argv = [sys.executable, "-m", "offline_coach"]
        argv += ["--host", host] if host else []
        argv += ["--port", str(port)] if port else []
        self.stdout.flush()
        os.execv(sys.executable, argv)  # noqa: S606 - our own interpreter, our own module
