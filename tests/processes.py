"""Running the app's own processes from tests, the way the run command does."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cryptography.fernet import Fernet

REPO = Path(__file__).resolve().parent.parent

# The least a production-mode process needs in its environment (keys made fresh per run).
PRODUCTION = {
    "DJANGO_SETTINGS_MODULE": "coach.wiring.settings",
    "DJANGO_DEBUG": "false",
    "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
    "FIELD_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
    "FIELD_LOOKUP_KEY": secrets.token_urlsafe(48),
    "ALLOWED_HOSTS": "coach.example.com",
    "SITE_URL": "https://coach.example.com",
    "EMAIL_HOST": "smtp.example.com",
    "EMAIL_USE_TLS": "true",
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get_json(url: str, timeout: float = 10) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def wait_until_answers(url: str, process: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the process exited with {process.returncode} before {url} answered")
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{url} did not answer within {timeout} s")


@dataclass(frozen=True)
class AppProcess:
    """A web process of the app: its base URL, and the process itself (to kill it)."""

    url: str
    process: subprocess.Popen


@contextmanager
def app_process(env: dict[str, str], *, uvicorn_args: list[str] = ()) -> Iterator[AppProcess]:
    """The ASGI app in its own uvicorn process, as production runs it (with `uvicorn_args`,
    exactly as some deployment file runs it: its host and port are replaced)."""
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "coach.wiring.asgi:application",
            *_without_address(uvicorn_args),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=REPO,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "coach.wiring.settings", **env},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_answers(base + "/healthz", process)
        yield AppProcess(base, process)
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=10)


@contextmanager
def uvicorn_app(env: dict[str, str]) -> Iterator[str]:
    """The ASGI app in its own uvicorn process; yields its base URL."""
    with app_process(env) as app:
        yield app.url


def _without_address(args: list[str]) -> list[str]:
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("--host", "--port"):
            skip = True
        elif arg not in ("uvicorn", "coach.wiring.asgi:application"):
            kept.append(arg)
    return kept
