"""A database that answers but cannot take a write, against a real web process: its disk
fills up (PostgreSQL on a small filesystem of its own, filled by a file beside it), or it
takes no more connections (every slot of a server with few held by other clients).
/healthz names what is wrong; a form that saves gets its page's own error with a 503 and
keeps what was typed; nothing is half-written; and all is well again once it is over."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from django.utils.html import escape

from coach.middleware import CANNOT_READ
from coach.views.pages import CANNOT_SAVE as MESSAGE_NOT_SAVED
from coach.wiring.localservices import LocalService, start_postgres
from offline_coach import ModelServer
from tests.coach.sse import post_form
from tests.emails.workers import wait_until
from tests.processes import REPO, AppProcess, app_process, get_json

TEXT = "I ran 5 km this morning"
# Room for PostgreSQL's files and the app's tables, and little more: a file fills the rest.
DISK_MEGABYTES = 96
# The most messages a person sends before one needs a page the full disk has no room for.
MESSAGES_AT_MOST = 300
SLOTS = 12


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A filesystem of DISK_MEGABYTES of its own (tmpfs), mounted for this test."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_MEGABYTES}m", "tmpfs", str(disk)], capture_output=True, text=True
    )
    assert mounted.returncode == 0, f"a small filesystem could not be mounted (needs root): {mounted.stderr}"
    try:
        yield disk
    finally:
        subprocess.run(["umount", "--lazy", str(disk)], check=False)


@contextlib.contextmanager
def database_in(folder: Path) -> Iterator[LocalService]:
    database = start_postgres(folder, throwaway=True)
    try:
        yield database
    finally:
        database.stop()


def prepared(database_url: str) -> str:
    """Migrate the database at `database_url` and sign a person in there: their cookie."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "coach.wiring.settings", "DATABASE_URL": database_url}
    subprocess.run([sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=REPO, env=env, check=True)
    script = (
        "from django.test import Client; from django.utils import timezone; from accounts.models import User; "
        "user = User.objects.create_user('disk@example.com', 'a password', onboarded_at=timezone.now()); "
        "client = Client(); client.force_login(user); print(client.cookies['sessionid'].value)"
    )
    signed_in = subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", script],
        cwd=REPO,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return f"sessionid={signed_in.stdout.split()[-1]}"


def app_on(
    database: LocalService, model_server: ModelServer, **extra: str
) -> contextlib.AbstractContextManager[AppProcess]:
    return app_process(
        {
            "DATABASE_URL": database.url,
            "OPENAI_BASE_URL": model_server.base_url,
            "OPENAI_API_KEY": "test-key",
            "COACH_MODEL": "offline-coach",
            "EMBEDDING_MODEL": "bag-of-words",
            "LLM_MAX_RETRIES": "0",
            # A person who writes fast: no limit of the chat's is what refuses them here.
            "COACH_MESSAGES_PER_MINUTE": "100000",
            "COACH_MAX_TURNS_AT_ONCE": "100000",
            # Replies that cannot be saved are not waited for when the process stops.
            "SHUTDOWN_GRACE_SECONDS": "1",
            **extra,
        }
    )


def rows(database: LocalService, query: str) -> int:
    with psycopg.connect(database.url) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return int(row[0])


def filled(disk: Path) -> Path:
    """A file that takes every byte left on `disk`."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as out:
        for chunk in (1 << 20, 1 << 12, 1 << 9):
            try:
                while True:
                    out.write(b"\0" * chunk)
            except OSError as error:
                assert error.errno == errno.ENOSPC
    return filler


def send(app: AppProcess, session_id: int | None, *, cookie: str, htmx: bool, text: str = TEXT) -> tuple[int, str]:
    url = f"{app.url}/chat/{session_id}/messages" if session_id else f"{app.url}/chat/new"
    return post_form(url, {"text": text, "client_id": str(uuid.uuid4())}, cookie=cookie, htmx=htmx)


def test_a_disk_that_fills_is_named_by_healthz_and_each_save_it_refuses_says_so_and_keeps_its_text(
    small_disk: Path, model_server: ModelServer
) -> None:
    with database_in(small_disk / "postgres") as database:
        cookie = prepared(database.url)
        with app_on(database, model_server) as app:
            assert send(app, None, cookie=cookie, htmx=True)[0] == 200
            session_id = rows(database, "SELECT max(id) FROM coach_chatsession")
            assert get_json(app.url + "/healthz") == (200, {"status": "ok"})

            filler = filled(small_disk)
            status, body = get_json(app.url + "/healthz")
            assert status == 503 and list(body["failing"]) == ["database"]
            assert body["failing"]["database"].startswith("disk full: it cannot write (could not extend file")
            assert body["failing"]["database"].endswith("No space left on device)")

            # What still fits in the pages the tables have goes in; the first message that
            # needs a new one is refused, in the message box's own words.
            # (Each in words of its own: the same words again, unanswered, are taken for a
            # second tab's copy of the first.)
            sent = 1
            while (answer := send(app, session_id, cookie=cookie, htmx=True, text=f"Run {sent}"))[0] == 200:
                sent += 1
                assert sent < MESSAGES_AT_MOST, "the messages never ran out of room"
            assert answer == (503, MESSAGE_NOT_SAVED)
            # Words of its own too: the first message's words again, while it may still be
            # unanswered, would be taken for its copy and redirected to, not refused.
            status, page = send(app, session_id, cookie=cookie, htmx=False, text=f"Run {sent}, from a plain form")
            assert status == 503
            assert f'role="alert">{escape(MESSAGE_NOT_SAVED)}</p>' in page
            assert f">Run {sent}, from a plain form</textarea>" in page
            # Nothing half-written: each message sent is there, and no other.
            assert rows(database, "SELECT count(*) FROM coach_message WHERE role = 'user'") == sent

            filler.unlink()
            wait_until(lambda: get_json(app.url + "/healthz") == (200, {"status": "ok"}), "healthz to be well again")
            assert send(app, session_id, cookie=cookie, htmx=True, text="Space again")[0] == 200
            assert rows(database, "SELECT count(*) FROM coach_message WHERE role = 'user'") == sent + 1


@contextlib.contextmanager
def slots_all_taken(database: LocalService) -> Iterator[None]:
    """Every connection slot of the server held by another client, the app's own closed
    by the server (as a connection storm after a failover leaves it), until the end."""
    admin = psycopg.connect(database.url, autocommit=True)
    held: list[psycopg.Connection] = []
    try:
        take_every_free_slot(database, held)
        # The app's pool reconnects as slots free up: closed and taken again until none of
        # its connections is left.
        while others := backends_besides(admin, held):
            for pid in others:
                admin.execute("SELECT pg_terminate_backend(%s)", [pid])
            wait_until(lambda: not set(others) & set(backends_besides(admin, held)), "the app's connections to close")
            take_every_free_slot(database, held)
        yield
    finally:
        for conn in held:
            conn.close()
        admin.close()


def take_every_free_slot(database: LocalService, held: list[psycopg.Connection]) -> None:
    with contextlib.suppress(psycopg.OperationalError):
        while True:
            held.append(psycopg.connect(database.url))


def backends_besides(admin: psycopg.Connection, held: list[psycopg.Connection]) -> list[int]:
    ours = [admin.info.backend_pid, *(conn.info.backend_pid for conn in held)]
    found = admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND NOT pid = ANY(%s)", [ours]
    ).fetchall()
    return [pid for (pid,) in found]


def with_few_slots(database: LocalService) -> None:
    with psycopg.connect(database.url, autocommit=True) as admin:
        admin.execute(f"ALTER SYSTEM SET max_connections = {SLOTS}")
    pid = database.pid()
    assert pid is not None
    os.kill(pid, signal.SIGTERM)
    wait_until(lambda: not database.alive(), "PostgreSQL to stop")
    database.restart()
    wait_until(lambda: rows(database, "SHOW max_connections") == SLOTS, "PostgreSQL to take the new limit")


def test_a_database_with_no_connection_to_give_is_named_by_healthz_and_every_page_says_so(
    tmp_path: Path, model_server: ModelServer
) -> None:
    with database_in(tmp_path / "postgres") as database:
        with_few_slots(database)
        cookie = prepared(database.url)
        # A request waits two seconds for a connection, not ten.
        with app_on(database, model_server, DATABASE_POOL_TIMEOUT_SECONDS="2") as app:
            assert send(app, None, cookie=cookie, htmx=True)[0] == 200
            messages = rows(database, "SELECT count(*) FROM coach_message WHERE role = 'user'")
            assert get_json(app.url + "/healthz") == (200, {"status": "ok"})

            with slots_all_taken(database):
                status, body = get_json(app.url + "/healthz")
                htmx = send(app, None, cookie=cookie, htmx=True)
                plain = send(app, None, cookie=cookie, htmx=False)
                page = get_page(app.url + "/memories/", cookie=cookie)
                part = get_page(app.url + "/memories/", cookie=cookie, htmx=True)

            assert status == 503 and list(body["failing"]) == ["database"]
            assert body["failing"]["database"].startswith("out of connections: the server takes no new ones (")
            assert "too many clients already" in body["failing"]["database"]
            # The message box's own words: the page shows them beside it, which keeps the text.
            assert htmx == (503, MESSAGE_NOT_SAVED)
            assert plain[0] == 503 and "<h1>We can't save right now</h1>" in plain[1]
            assert page[0] == 503 and "<h1>We can't load this page right now</h1>" in page[1]
            assert part == (503, CANNOT_READ)
            wait_until(lambda: get_json(app.url + "/healthz") == (200, {"status": "ok"}), "healthz to be well again")
            assert rows(database, "SELECT count(*) FROM coach_message WHERE role = 'user'") == messages
            assert send(app, None, cookie=cookie, htmx=True)[0] == 200


def get_page(url: str, *, cookie: str, htmx: bool = False) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Cookie": cookie, **({"HX-Request": "true"} if htmx else {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
