"""The chat's and the memory's hot paths in this tree against the same paths in another
commit, measured in turn (A B A B ...) in one run: whether hand-written SQL pays.

    bin/bench statements --against COMMIT [--rounds 5] [--calls 150]

Each path is called through the public function both trees have (a message posted, a
reply's reader finding its message, a turn beginning, a reply saved, a memory saved and
searched through the model's tool, the prompt's memories and emails), for a person with 74
memories and a few emails, against one PostgreSQL (a database per tree, each migrated by
its own tree) and the offline coach's bag of words for embeddings (an instant model, so
what is timed is the app). Each round starts one process per tree; the figure is the
median of the rounds' medians. The criterion the code follows (docs/architecture.md, SQL):
hand-written SQL stays only where a person meets what it saves, around a reply and on
every signed-in request; a memory tool call's or a prompt's reads, each part of a wait for
a model that takes seconds, are the ORM's, and this measures what that costs.

A benchmark, not a test: it prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
PERSON = "bench-statements@example.com"
MEMORIES = 74


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", required=True, help="the commit to measure this tree against")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=150)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _measure_here(Path(args.child), calls=args.calls)
        return
    _compare(args.against, rounds=args.rounds, calls=args.calls)


# The parent: two trees, measured in turn -----------------------------------------------------


def _compare(against: str, *, rounds: int, calls: int) -> None:
    import psycopg
    from psycopg import sql

    with tempfile.TemporaryDirectory() as scratch:
        other = Path(scratch) / "tree"
        subprocess.run(["git", "-C", str(HERE), "worktree", "add", "--detach", "-q", str(other), against], check=True)
        server = subprocess.Popen([sys.executable, "-m", "offline_coach", "--port", "0"], stdout=subprocess.PIPE)
        try:
            embeddings = server.stdout.readline().decode().split()[-1]
            trees = {"A": other, "B": HERE}
            urls = {}
            with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as admin:
                for name in trees:
                    database = f"bench_statements_{name.lower()}"
                    admin.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(database)))
                    admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
                    urls[name] = os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/" + database
            results: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
            queries: dict[str, dict[str, int]] = {}
            for round_number in range(rounds):
                for name, tree in trees.items():
                    measured = _child(tree, urls[name], embeddings, calls=calls, redis_database=len(results[name]) % 4)
                    results[name].append(measured["p50"])
                    queries[name] = measured["queries"]
                print(f"round {round_number + 1} of {rounds} done", flush=True)
        finally:
            server.terminate()
            server.wait(timeout=30)
            subprocess.run(["git", "-C", str(HERE), "worktree", "remove", "--force", str(other)], check=False)
    _print(against, results, queries)


# Every process of a tree reads what the first one stored: the same keys for all, made
# once a run (the settings refuse a lookup key that does not look random).
KEYS = {"FIELD_ENCRYPTION_KEYS": "", "FIELD_LOOKUP_KEY": ""}


def _child(tree: Path, database_url: str, embeddings: str, *, calls: int, redis_database: int) -> dict:
    if not KEYS["FIELD_ENCRYPTION_KEYS"]:
        from cryptography.fernet import Fernet

        KEYS["FIELD_ENCRYPTION_KEYS"] = Fernet.generate_key().decode()
        KEYS["FIELD_LOOKUP_KEY"] = secrets.token_urlsafe(48)
    env = {
        **os.environ,
        **KEYS,
        "DATABASE_URL": database_url,
        "REDIS_URL": os.environ["REDIS_URL"].rsplit("/", 1)[0] + f"/{8 + redis_database}",
        "OPENAI_BASE_URL": embeddings,
        "OPENAI_API_KEY": "",
        "EMBEDDING_MODEL": "bag-of-words",
        # Each timed save is a new fact: its near-copy search runs, but flags none of the
        # 74 alike notes (as in bench/chat.py), so every save writes.
        "MEMORY_DEDUP_THRESHOLD": "0.9",
        "MEMORY_DEDUP_FAR_THRESHOLD": "0.95",
        "PYTHONPATH": str(tree),
    }
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--against", "-", "--calls", str(calls), "--child", str(tree)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the measurement in {tree} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _print(against: str, results: dict[str, list[dict[str, float]]], queries: dict[str, dict[str, int]]) -> None:
    print()
    print(
        f"| path (p50 ms, median of {len(results['A'])} rounds) | {against[:12]} | this tree | this / that | "
        "this - that ms | queries |"
    )
    print("|---|---:|---:|---:|---:|---|")
    for path in results["B"][0]:
        before = statistics.median(r[path] for r in results["A"] if path in r)
        now = statistics.median(r[path] for r in results["B"])
        counts = f"{queries['A'].get(path, '?')} -> {queries['B'][path]}"
        print(f"| {path} | {before:.2f} | {now:.2f} | {now / before:.2f} | {now - before:+.2f} | {counts} |")


# A child: one tree's paths, measured in this process --------------------------------------------


def _measure_here(tree: Path, *, calls: int) -> None:
    sys.path.insert(0, str(tree))
    from bench.setup import django_for_benchmarks

    django_for_benchmarks()
    from django.conf import settings
    from django.db import connection, reset_queries
    from django.test.utils import CaptureQueriesContext

    # As served: no query is logged (DEBUG logs each one, which costs more the more there
    # are); the count below logs its one call only.
    settings.DEBUG = False
    paths = _paths()
    p50, counts = {}, {}
    for name, (prepare, call) in paths.items():
        for _ in range(5):
            call(prepare())
        ready = prepare()
        reset_queries()  # the log is capped: counting needs room in it
        with CaptureQueriesContext(connection) as captured:
            call(ready)
        counts[name] = len(captured.captured_queries)
        timings = []
        for _ in range(calls):
            ready = prepare()
            started = time.perf_counter()
            call(ready)
            timings.append((time.perf_counter() - started) * 1000)
        p50[name] = statistics.median(timings)
    print(json.dumps({"p50": p50, "queries": counts}))


Path_ = tuple[Callable[[], object], Callable[[object], object]]


def _paths() -> dict[str, Path_]:
    """Each path as (prepare, call): what is made ready untimed, then the timed call."""
    from django.test import Client

    from coach.services import session_start

    person = _person()
    session = session_start(user=person)
    client = Client()
    client.force_login(person)
    return _chat_paths(person, session, client.cookies["sessionid"].value) | _memory_paths(person)


def _chat_paths(person: Any, session: Any, login: str) -> dict[str, Path_]:
    """A message posted, its reader, its turn's claim and its reply saved."""
    from django.contrib.auth import get_user

    from coach import selectors
    from coach.models import Message
    from coach.services import message_post_as

    claiming = _claiming()

    def settled() -> None:
        # What the last calls left waiting or being answered counts against the person's
        # turns at once: answered, untimed.
        Message.objects.filter(session__user=person, status__in=["pending", "answering"]).update(status="answered")

    def post(_: object) -> None:
        message = message_post_as(
            user_id=person.pk, session_id=session.pk, text="Plan my week", client_id=uuid.uuid4(), turns_at_most=2
        )
        Message.objects.filter(pk=message.pk).update(status=Message.Status.ANSWERED)

    def a_message() -> Message:
        settled()
        message = message_post_as(user_id=person.pk, session_id=session.pk, text="How far today?", client_id=None)
        Message.objects.filter(pk=message.pk).update(status=Message.Status.ANSWERED)
        return message

    def signed_in(_: object) -> object:
        return get_user(_request(login))

    def reader(message: Message) -> object:
        request = _request(login)
        if hasattr(selectors, "message_to_follow_with_login"):
            read = selectors.message_to_follow_with_login(request.session, session_pk=session.pk, message_pk=message.pk)
            user = get_user(request)
            return selectors.message_to_follow_in(read, user=user, session_pk=session.pk, message_pk=message.pk)
        return selectors.message_to_follow(user=get_user(request), session_pk=session.pk, message_pk=message.pk)

    def pending() -> Message:
        message = a_message()
        Message.objects.filter(pk=message.pk).update(status=Message.Status.PENDING)
        return message

    def saving() -> object:
        return claiming.claimed(pending(), person)

    return {
        "a message posted (lock, duplicate check, insert)": (settled, post),
        "a login loaded with its person": (_nothing, signed_in),
        "a reply's reader: the login and its message": (a_message, reader),
        "a turn begins (claim, history, memories, emails)": (pending, lambda message: claiming.begin(message, person)),
        "a reply saved": (saving, claiming.save),
    }


def _memory_paths(person: Any) -> dict[str, Path_]:
    """The memory tools as a turn calls them, and what the prompt reads of memory and email."""
    from django.utils import timezone

    from emails.selectors import sent_emails_for_prompt
    from memory.context import assemble_memory_context
    from memory.selectors import memories_for_prompt
    from memory.tools import ToolContext, run_tool

    context = ToolContext(user=person)

    def save_call(_: object) -> None:
        _reset_writes(context)
        run = uuid.uuid4().hex[:8]
        arguments = {
            "key": f"swim-{run}",
            "tier": "episodic",
            "category": "habit",
            "summary": f"Swims lengths on Tuesdays zq{run}",
            "content": f"Swims lengths on Tuesdays at the lido zq{run}",
            "due_at": None,
            "keep_separate": None,
        }
        result = json.loads(run_tool(context, "save_memory", json.dumps(arguments)))
        assert result["status"] == "saved", result

    def forget_saves() -> None:
        # The store stays at its 74: the saves of the last call are taken back, untimed.
        _forget_swims(person)

    def search_call(_: object) -> None:
        # Each call as a turn's first search: a turn's reads are bounded, and one refused
        # past the bound reads nothing.
        context.reads = 0
        result = json.loads(run_tool(context, "search_memories", json.dumps({"query": "weekend runs", "limit": None})))
        assert "memories" in result, result

    return {
        "save_memory through run_tool (74 memories)": (forget_saves, save_call),
        "search_memories through run_tool": (_nothing, search_call),
        "the prompt's memories (74)": (_nothing, lambda _: memories_for_prompt(user=person)),
        "the prompt's emails": (_nothing, lambda _: sent_emails_for_prompt(person)),
        "the memory block assembled": (_nothing, lambda _: assemble_memory_context(user=person, now=timezone.now())),
    }


def _nothing() -> None:
    return None


class _Claiming:
    """A turn's claim and its reply, as whichever tree has them."""

    def __init__(self) -> None:
        try:
            from coach import claims
        except ImportError:
            claims = None
        from coach import services

        self.claims = claims if claims is not None and hasattr(claims, "turn_begin") else None
        self.services = services

    def begin(self, message: object, person: object) -> object:
        from django.utils import timezone

        begin = (self.claims or self.services).turn_begin
        return begin(user_id=person.pk, message_id=message.pk, now=timezone.now())

    def claimed(self, message: object, person: object) -> object:
        from django.utils import timezone

        if self.claims is not None:
            return self.claims.turn_claim(message_id=message.pk, user_id=person.pk, now=timezone.now())
        return self.services.turn_claim(message_id=message.pk, user_id=person.pk, now=timezone.now())

    def save(self, claim: object) -> object:
        if self.claims is not None:
            return self.claims.reply_save(attempt=claim, text="Three short runs.")
        return self.services.reply_save(message=claim, text="Three short runs.")


def _claiming() -> _Claiming:
    return _Claiming()


def _reset_writes(context: object) -> None:
    context.writes = 0
    if hasattr(context, "write_calls"):
        context.write_calls = 0


def _forget_swims(person: object) -> None:
    from memory.models import Memory

    swims = [m.pk for m in Memory.objects.filter(user=person).only("summary") if m.summary.startswith("Swims")]
    Memory.objects.filter(pk__in=swims).delete()


def _request(session_key: str) -> object:
    from django.conf import settings
    from django.http import HttpRequest
    from django.utils.module_loading import import_string

    request = HttpRequest()
    request.session = import_string(f"{settings.SESSION_ENGINE}.SessionStore")(session_key)
    return request


def _person() -> object:
    """The person whose paths are timed, made the first time a tree's database is used."""
    from django.utils import timezone

    from accounts.models import User
    from coach.services import message_post, session_start
    from emails.models import Email
    from infra.llm import Embedding
    from memory.drafts import MemoryDraft
    from memory.services import memory_save
    from offline_coach import bag_of_words_embedding

    found = User.objects.filter(email=PERSON).first()
    if found is not None:
        return found
    person = User.objects.create_user(PERSON, "bench-password", onboarded_at=timezone.now())
    for n in range(MEMORIES):
        text = f"Runs {n} kilometres on the {n}th day, then stretches (note {n})"
        category = "episode" if n < 14 else ("injury" if n % 10 == 0 else "habit")
        draft = MemoryDraft(key=f"note-{n}", tier="episodic", category=category, summary=text, content=text)
        embedding = Embedding(bag_of_words_embedding(text), "bag-of-words")
        # The weekly summaries as the app writes them: a coach may not name one an episode.
        weekly = category == "episode"
        memory_save(user=person, draft=draft, source="coach", actor="coach", embedding=embedding, weekly_episode=weekly)
    for n in range(6):
        Email.objects.create(
            user=person,
            kind=Email.Kind.NUDGE,
            period_key=f"week-{n}",
            status=Email.Status.SENT,
            subject=f"Week {n}",
            body_text=f"Hi,\n\nWeek {n} went well.",
            sent_at=timezone.now(),
        )
    history = session_start(user=person)
    for n in range(10):
        message_post(session=history, text=f"Earlier message {n}", client_id=None)
    return person


if __name__ == "__main__":
    main()
