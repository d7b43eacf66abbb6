"""A PostgreSQL restarted under a running web process costs no request: every pooled
connection is checked before it is handed out, so one the server closed is replaced, never
used (infra/dbpool.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from coach.wiring.localservices import LocalService, start_postgres
from offline_coach import ModelServer
from tests.processes import REPO, app_process

# A session key no login has: the page looks it up in the database, then shows the landing
# page to the visitor it takes them for. One query per request, on a pooled connection.
UNKNOWN_SESSION = "sessionid=" + "x" * 32
# Connections the web process keeps open: each one the server closes when it restarts.
POOL_KEEPS = 8


@pytest.fixture(scope="module")
def own_database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalService]:
    """A migrated PostgreSQL of this module's own, to kill and start again."""
    database = start_postgres(tmp_path_factory.mktemp("postgres"), throwaway=True)
    try:
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "--verbosity", "0"],
            cwd=REPO,
            env={**os.environ, "DATABASE_URL": database.url},
            check=True,
            timeout=120,
        )
        yield database
    finally:
        database.stop()


def page_status(url: str) -> int:
    request = urllib.request.Request(url, headers={"Cookie": UNKNOWN_SESSION})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def app_connections(database: LocalService) -> int:
    """How many connections the app holds open to its database (this one is to another)."""
    admin_url = database.url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin_url) as admin:
        [(count,)] = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = 'coach' AND backend_type = 'client backend'"
        ).fetchall()
    return count


def wait_until(condition: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.05)


def restarted(database: LocalService, how: signal.Signals) -> None:
    """The postmaster sent `how` (SIGINT: a fast shutdown, each session told "terminating
    connection due to administrator command"; SIGKILL: a crash, its sessions left to find
    out), then started again at the same address once all its processes are gone."""
    postmaster = database.pid()
    sessions = _children(postmaster)
    os.kill(postmaster, how)
    # Until the postmaster is reaped it counts as running, and is not started again; until
    # its sessions end, a new one could not take the shared memory they hold.
    wait_until(lambda: not database.alive() and not any(_running(pid) for pid in sessions))
    database.restart()


def _children(pid: int) -> list[int]:
    tasks = Path(f"/proc/{pid}/task").iterdir()
    return [int(child) for task in tasks for child in (task / "children").read_text().split()]


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")  # a zombie has ended; only its parent has yet to hear


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["fast-restart", "killed"])
def test_after_postgres_restarts_every_request_succeeds_on_the_connections_the_pool_held(
    own_database: LocalService, how: signal.Signals
) -> None:
    env = {"DATABASE_URL": own_database.url, "DATABASE_POOL_MIN_SIZE": str(POOL_KEEPS)}
    with app_process(env) as app:
        assert page_status(app.url + "/") == 200
        wait_until(lambda: app_connections(own_database) >= POOL_KEEPS)
        held = app_connections(own_database)

        restarted(own_database, how)

        # One after another, so each connection the pool held is handed out in its turn.
        statuses = [page_status(app.url + "/") for _ in range(held + 3)]

    failed = len(statuses) - statuses.count(200)
    assert failed == 0, f"{failed} of {len(statuses)} requests failed; the pool held {held} connections"


# A person of the test database's own, signed in, with a conversation: made by the app's
# own code in a process of its own (the test's ORM speaks to the suite's database).
_A_PERSON = """
from allauth.account.models import EmailAddress
from django.test import Client
from django.utils import timezone
from accounts.models import User
from coach.services import session_start
user = User.objects.create_user("restart@example.com", "a long test password", onboarded_at=timezone.now())
EmailAddress.objects.create(user=user, email=user.email, primary=True, verified=True)
client = Client()
client.force_login(user)
print(client.cookies["sessionid"].value, session_start(user=user).pk)
"""


def a_person_signed_in(database: LocalService) -> tuple[str, int]:
    made = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", _A_PERSON],
        cwd=REPO,
        env={**os.environ, "DATABASE_URL": database.url},
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    session_key, conversation = made.stdout.split()[-2:]
    return f"sessionid={session_key}", int(conversation)


def unfinished_turns(database: LocalService) -> int:
    with psycopg.connect(database.url) as connection:
        [(count,)] = connection.execute(
            "SELECT count(*) FROM coach_message WHERE role = 'user' AND status IN ('pending', 'answering')"
        ).fetchall()
    return count


def test_turns_in_flight_when_postgres_restarts_each_end_and_no_request_after_fails(
    own_database: LocalService, model_server: ModelServer
) -> None:
    from tests.coach.sse import post_form, read_events

    cookie, conversation = a_person_signed_in(own_database)
    words = " ".join(f"word{n}" for n in range(40))
    for _ in range(4):
        model_server.queue_text(words, chunk_delay_seconds=0.1)
    env = {
        "DATABASE_URL": own_database.url,
        "DATABASE_POOL_MIN_SIZE": str(POOL_KEEPS),
        "OPENAI_BASE_URL": model_server.base_url,
        "OPENAI_API_KEY": "test-key",
        "COACH_MODEL": "offline-coach",
        "EMBEDDING_MODEL": "bag-of-words",
        "LLM_MAX_RETRIES": "0",
        "COACH_MAX_TURNS_AT_ONCE": "4",
    }
    with app_process(env) as app:
        base = f"{app.url}/chat/{conversation}"
        posted = []
        for number in range(4):
            status, _ = post_form(f"{base}/messages", {"text": f"Plan week {number}"}, cookie=cookie)
            assert status == 200
            posted.append(number)
        wait_until(lambda: unfinished_turns(own_database) == 4)
        restarted(own_database, signal.SIGINT)
        # Every turn ends, answered or failed and retryable: none is left being answered.
        wait_until(lambda: unfinished_turns(own_database) == 0, timeout=60)
        statuses = [page_status(app.url + "/") for _ in range(POOL_KEEPS + 3)]
        with psycopg.connect(own_database.url) as connection:
            ids = [pk for (pk,) in connection.execute("SELECT id FROM coach_message WHERE role = 'user'").fetchall()]
        endings = [list(read_events(f"{base}/messages/{pk}/reply", cookie=cookie))[-1].name for pk in ids]

    assert statuses == [200] * len(statuses)
    assert len(ids) == 4 and set(endings) <= {"done", "failed"}, endings
