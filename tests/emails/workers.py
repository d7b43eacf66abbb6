"""Waiting on real workers: a condition awaited with a deadline, a worker and beat run as
processes of their own (so a test can kill them, whole or one pool process), and what is
left in Redis."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import count
from pathlib import Path

import redis
from django.conf import settings
from django.db import connection

from tests.processes import REPO

WAIT_SECONDS = 30.0
POLL_SECONDS = 0.05
_names = count(1)


def wait_until(condition: Callable[[], bool], what: str, timeout: float = WAIT_SECONDS) -> None:
    """Return as soon as `condition()` holds; fail naming `what` if it does not in time."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what}")
        time.sleep(POLL_SECONDS)


def in_thread_worker_idle() -> bool:
    """No task running, reserved or waiting for its countdown in this process's worker."""
    from celery.worker import state

    return not state.active_requests and not state.reserved_requests


def tasks_waiting_in_redis() -> int:
    """Messages queued and not yet fetched by any worker."""
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    try:
        return client.llen("celery")
    finally:
        client.close()


def forget_unacknowledged() -> None:
    """Drop what killed workers left unacknowledged (Redis would hand it out again after
    the visibility timeout, an hour on): not the next test's business."""
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    try:
        client.delete("unacked", "unacked_index", "unacked_mutex")
    finally:
        client.close()


def tasks_left_in_redis() -> int:
    """Messages queued or delivered and not yet acknowledged."""
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    try:
        return client.llen("celery") + client.hlen("unacked")
    finally:
        client.close()


def _env(*, smtp_port: int, model_url: str) -> dict[str, str]:
    """A worker's or beat's environment: the test settings, this test's database, its SMTP
    server and its model server (see worker_settings.py)."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.emails.worker_settings",
        "COACH_TEST_DATABASE_NAME": connection.settings_dict["NAME"],
        "COACH_TEST_SMTP_PORT": str(smtp_port),
        "OPENAI_BASE_URL": model_url,
        "OPENAI_API_KEY": "test-key",
        "COACH_MODEL": "offline-coach",
        "EMBEDDING_MODEL": "bag-of-words",
        "LLM_MAX_RETRIES": "0",
    }


@contextmanager
def worker_process(*, smtp_port: int, model_url: str, name: str | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """`celery -A coach.wiring worker`, as the run command starts it (its pool of child processes,
    one child here), against this test's database and Redis (see worker_settings.py);
    stopped on exit unless the test killed it. `name` is its node name's first part: a
    worker started again under the same name is the same worker restarted, as a
    supervisor or a container's restart policy would."""
    with _celery(
        "worker",
        *("--pool", "prefork", "--concurrency", "1", "--hostname", f"{name or f'killable-{next(_names)}'}@%h"),
        *("--without-heartbeat", "--without-mingle", "--without-gossip"),
        env=_env(smtp_port=smtp_port, model_url=model_url),
    ) as process:
        yield process


@contextmanager
def beat_process(*, smtp_port: int, model_url: str, folder: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`celery -A coach.wiring beat`, as the run command starts it, with the app's own schedule:
    what hands on a dead sender's claims (the dispatcher, every 5 s) and sends account
    mail (every 5 s) runs because beat asks for it, as in production."""
    with _celery(
        "beat", "--schedule", str(folder / "celerybeat-schedule"), env=_env(smtp_port=smtp_port, model_url=model_url)
    ) as process:
        yield process


@contextmanager
def _celery(*args: str, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "coach.wiring", *args, "--loglevel", "WARNING"], cwd=REPO, env=env
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=WAIT_SECONDS)


def pool_processes(worker: subprocess.Popen[bytes]) -> list[int]:
    """The worker's pool processes, the children that run its tasks, once it has them."""
    wait_until(lambda: bool(_children(worker.pid)), "the worker's pool process to start")
    return _children(worker.pid)


def kill_whole(worker: subprocess.Popen[bytes]) -> None:
    """SIGKILL to the worker and every process of its pool, as a container killed, or the
    out-of-memory killer taking its whole group, leaves it: nothing of it runs on."""
    children = _children(worker.pid)
    worker.send_signal(signal.SIGKILL)
    for child in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
    worker.wait()


def kill_alone(pid: int) -> None:
    """SIGKILL to one process, as the out-of-memory killer picks the one using the most."""
    os.kill(pid, signal.SIGKILL)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(FileNotFoundError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(child) for child in (task / "children").read_text().split()]
    return found
