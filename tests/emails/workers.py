"""Waiting on real workers: a condition awaited with a deadline, a worker run as a process
of its own (so a test can kill it), and what is left in Redis."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import count

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


@contextmanager
def worker_process(*, smtp_port: int, model_url: str, name: str | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """`celery -A coach worker`, as the run command starts it (its pool of child processes,
    one child here), against this test's database and Redis (see worker_settings.py);
    stopped on exit unless the test killed it. `name` is its node name's first part: a
    worker started again under the same name is the same worker restarted, as a
    supervisor or a container's restart policy would."""
    env = {
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
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "coach",
            "worker",
            "--pool",
            "prefork",
            "--concurrency",
            "1",
            "--hostname",
            f"{name or f'killable-{next(_names)}'}@%h",
            "--without-heartbeat",
            "--without-mingle",
            "--without-gossip",
            "--loglevel",
            "WARNING",
        ],
        cwd=REPO,
        env=env,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=WAIT_SECONDS)
