"""Running the app's own processes from tests, the way the run command does."""

from __future__ import annotations

import json
import os
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

REPO = Path(__file__).resolve().parent.parent


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
def app_process(env: dict[str, str]) -> Iterator[AppProcess]:
    """The ASGI app in its own uvicorn process, as production runs it."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "coach.asgi:application", "--port", str(port), "--log-level", "warning"],
        cwd=REPO,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "coach.settings", **env},
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
