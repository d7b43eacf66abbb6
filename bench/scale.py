"""Costs that grow with the person, not with the database: 10 people and 10,000, side by side.

    bin/bench scale [--people 10000] [--runs 30] [--pairs 40] [--bursts 1,10,50,100]

Builds 10 people, then --people in all, each with a year of use (bench/scale_world.py:
conversations, memories and their history, emails, embeddings, in a year's proportions),
and prints, measured at both sizes in the same run:

- each statement of a turn (a message posted, its reply streamed, as the browser takes
  them, in this process) and of the conversation and memory pages: its p50 time and the
  shape of its plan as the database runs it (each table it reads, by which index, how many
  rows; a whole read of a table that grows with people is marked: bench/plans.py), with
  the ratio of the two sizes (target: at most 1.5x);
- each periodic job (Celery beat's, and the sweep every web process runs) when it has
  nothing to do: p50 time, statements, and whole reads (target: at most 1.5x);
- the conversation page's size and time at 10 and 200 exchanges (target: at most 1.5x);
- a turn's CPU over real HTTP, against the web processes the run command starts, with
  PostgreSQL and Redis counted, against its floor (two bare requests and the same
  completion streamed through the SDK), alternated pairs (target: at most 1.4x);
- at --people: the first words of 1, 10, 50 and 100 chats at once (each a person posting
  a message and following its reply, which the model starts at once and streams over two
  seconds), each burst's added delay beside the CPU its turns needed over the machine's
  cores (their floor here; target at 50: at most 1.5x), and whether every reply was
  streamed.

A benchmark, not a test: it prints tables. Figures are ratios and times of the same run,
on a machine that may be running other work.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.setup import django_for_benchmarks

django_for_benchmarks()

from django.conf import settings  # noqa: E402
from django.db import connection, connections  # noqa: E402
from django.test import AsyncClient, Client  # noqa: E402
from django.utils import timezone  # noqa: E402
from django.utils.module_loading import import_string  # noqa: E402

from accounts.models import User  # noqa: E402
from bench.chat_people import REPLY, one_turn  # noqa: E402
from bench.plans import Scan, explainable, growing_tables, reads  # noqa: E402
from bench.scale_http import chatters, cpu_against_floor, first_words  # noqa: E402
from bench.scale_world import people_add, rows_per_table, settled, year_copy, year_write  # noqa: E402
from bench.statement_log import Statement, StatementLog, label  # noqa: E402
from coach.claims import turns_sweep  # noqa: E402
from coach.models import ChatSession, Message  # noqa: E402
from coach.services import session_start  # noqa: E402
from offline_coach import ModelServer  # noqa: E402
from offline_coach.bag_of_words import MODEL_NAME  # noqa: E402

TARGET = 1.5
CPU_TARGET = 1.4
COPY_BATCH = 500
SHORT, LONG = 10, 200
SMALL, LARGE = "small", "large"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--people", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=30, help="turns, page loads and job runs measured at each size")
    parser.add_argument("--pairs", type=int, default=40, help="turn and floor pairs for the CPU per turn")
    parser.add_argument("--bursts", default="1,10,50,100", help="chats at once, for the first words")
    args = parser.parse_args()
    server = ModelServer(scripted=True).start()
    settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY = server.base_url, "bench"
    settings.EMBEDDING_MODEL, settings.LLM_MAX_RETRIES = MODEL_NAME, 0
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    # The person measured chats far faster than any limit lets a real one.
    settings.COACH_MESSAGES_PER_MINUTE = settings.COACH_MAX_OPEN_STREAMS = 100_000
    try:
        run(args, server)
    finally:
        server.stop()


def run(args: argparse.Namespace, server: ModelServer) -> None:
    bursts = tuple(int(n) for n in args.bursts.split(","))
    started = time.perf_counter()
    now = timezone.now()
    measured = people_add(0, 10, now=now)
    year_write(measured, now=now)
    pages = _conversations_to_show(User.objects.get(pk=measured[0]))
    settled()
    small = str(connection.settings_dict["NAME"])
    large = f"{small}_{args.people}"
    database_copy(small, large)
    print(f"10 people built in {time.perf_counter() - started:.0f} s, and copied", flush=True)
    with in_database(large):
        for first in range(10, args.people, COPY_BATCH):
            ids = people_add(first, min(COPY_BATCH, args.people - first), now=now)
            year_copy(measured[1], ids)
            print(f"  {first + len(ids):,} people", flush=True)
        settled()
    print(f"{args.people:,} people built, {time.perf_counter() - started:.0f} s in", flush=True)
    sizes = {SMALL: Size(small), LARGE: Size(large)}
    for size in sizes.values():
        with in_database(size.database):
            size.prepared(User.objects.get(pk=measured[0]))
    # What the build left in this process is kept out of every collection to come: the
    # benchmark's own garbage collector would otherwise cost more after the larger build.
    gc.collect()
    gc.freeze()
    for number in range(args.runs):
        for size in sizes.values():
            with in_database(size.database):
                size.round(server, pages, number)
    print(f"measured at both sizes in turn, {time.perf_counter() - started:.0f} s in", flush=True)
    for size in sizes.values():
        with in_database(size.database):
            size.cpu = cpu_against_floor(server, chatters([measured[2]])[0], args.pairs, database=size.database)
    print(f"CPU per turn measured, {time.perf_counter() - started:.0f} s in", flush=True)
    with in_database(large):
        people = chatters(list(User.objects.order_by("pk").values_list("pk", flat=True)[10 : 10 + max(bursts)]))
        bursts_measured = first_words(server, people, bursts, database=large)
    print(f"bursts done, {time.perf_counter() - started:.0f} s in\n", flush=True)
    _print(args, sizes[SMALL].figures(), sizes[LARGE].figures(), bursts_measured)


def _conversations_to_show(user: User) -> dict[int, int]:
    """Conversations of SHORT and LONG exchanges, written through the models: their ids."""
    made = {}
    for exchanges in (SHORT, LONG):
        session = session_start(user=user)
        for n in range(exchanges):
            said = Message.objects.create(
                session=session, role="user", content=f"Exchange {n}: " + "how my week went " * 6, status="answered"
            )
            Message.objects.create(
                session=session, role="assistant", content=REPLY + " " + REPLY, status="complete", reply_to=said
            )
        ChatSession.objects.filter(pk=session.pk).update(ended_at=timezone.now())
        made[exchanges] = session.pk
    return made


# Two sizes, one PostgreSQL -------------------------------------------------------------------


def database_copy(source: str, copy: str) -> None:
    """A copy of database `source` named `copy`, made by PostgreSQL from it as a template
    (which no one may be connected to meanwhile)."""
    _database_leave()
    with psycopg.connect(**_server_parameters(), dbname="postgres", autocommit=True) as maintenance:
        maintenance.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(copy), sql.Identifier(source))
        )


@contextmanager
def in_database(name: str) -> Iterator[None]:
    """Every connection of this process, in any thread, to database `name` meanwhile: the
    two sizes are measured in turn, round by round, so that whatever else the machine
    does in the meantime weighs on both alike."""
    previous = str(connection.settings_dict["NAME"])
    _database_leave()
    connection.settings_dict["NAME"] = name
    try:
        yield
    finally:
        _database_leave()
        connection.settings_dict["NAME"] = previous


def _database_leave() -> None:
    # The pool is the process's, shared by every thread: closed, no thread keeps a
    # connection to the database left, and the next one opens to the database now named.
    connections.close_all()
    connection.close_pool()


def _server_parameters() -> dict[str, Any]:
    found = connection.settings_dict
    return {"host": found["HOST"], "port": found["PORT"], "user": found["USER"], "password": found["PASSWORD"]}


class Size:
    """One of the two databases, and what was measured in it round by round."""

    def __init__(self, database: str) -> None:
        self.database = database
        self.turn_log, self.page_log = StatementLog(), StatementLog()
        self.jobs: dict[str, Callable[[], object]] = {
            name: import_string(entry["task"]) for name, entry in settings.CELERY_BEAT_SCHEDULE.items()
        }
        self.jobs["web process sweep"] = lambda: turns_sweep(silent_seconds=settings.COACH_TURN_SILENT_SECONDS)
        self.job_found: dict[str, dict[str, Any]] = {}
        self.job_ms: dict[str, list[float]] = {name: [] for name in self.jobs}
        self.page_found: dict[str, tuple[int, list[float]]] = {}
        self.cpu: dict[str, Any] = {}

    def prepared(self, person: User) -> None:
        """Before the rounds: the rows of each table, anything due done by each job (what
        is timed is finding nothing), each job's statements and the reads of their plans,
        and the person signed in with a conversation of their own, warmed by three turns."""
        self.rows, self.growing = rows_per_table(), growing_tables()
        log = StatementLog()
        for name, job in self.jobs.items():
            did = job()
            log.clear()
            with log.recording():
                job()
            statements = list(log.statements.values())
            self.job_found[name] = {
                "did": did,
                "statements": len(statements),
                "reads": [scan for s in statements for scan in _shape(s)],
            }
        self.person = person
        self.session = session_start(user=person)
        self.turn_client, self.page_client = AsyncClient(), Client()
        self.turn_client.force_login(person)
        self.page_client.force_login(person)

    def round(self, server: ModelServer, pages: dict[int, int], number: int) -> None:
        """One run of each job, one turn (its statements recorded), one load of each page.

        Each job runs once untimed first: the last round's turn left work due (an exchange
        to index, a conversation to summarise), and what is timed is finding nothing to do."""
        for name, job in self.jobs.items():
            job()
            began = time.perf_counter()
            job()
            self.job_ms[name].append((time.perf_counter() - began) * 1000)
        for warm in range(3 if number == 0 else 0):
            server.queue_text(REPLY)
            asyncio.run(one_turn(self.turn_client, self.session, -1 - warm))
        server.queue_text(REPLY)
        with self.turn_log.recording():
            asyncio.run(one_turn(self.turn_client, self.session, number))
        for name, path in (
            (f"conversation page, {SHORT} exchanges", f"/chat/{pages[SHORT]}/"),
            (f"conversation page, {LONG} exchanges", f"/chat/{pages[LONG]}/"),
            ("memory page", "/memories/"),
        ):
            if number == 0:
                self.page_client.get(path)
            began = time.perf_counter()
            with self.page_log.recording():
                response = self.page_client.get(path)
            elapsed = (time.perf_counter() - began) * 1000
            assert response.status_code == 200, (path, response.status_code)
            self.page_found.setdefault(name, (len(response.content), []))[1].append(elapsed)

    def figures(self) -> dict[str, Any]:
        """What _print reads, explained at this size."""
        with in_database(self.database):
            turn, pages = dict(self.turn_log.statements), dict(self.page_log.statements)
            shapes = {key: _shape(s) for key, s in {**turn, **pages}.items()}
        runs = len(next(iter(self.job_ms.values())))
        return {
            "rows": self.rows,
            "jobs": {
                name: {**found, "p50": statistics.median(self.job_ms[name])} for name, found in self.job_found.items()
            },
            "turn": turn,
            "turn_statements": sum(len(s.milliseconds) for s in turn.values()) / runs,
            "pages": pages,
            "page_figures": {name: (size, statistics.median(ms)) for name, (size, ms) in self.page_found.items()},
            "shapes": shapes,
            "growing": self.growing,
            "cpu": self.cpu,
        }


def _shape(statement: Statement) -> list[Scan]:
    """The tables the statement reads, and how much of each, as the database runs it at
    this size (undone: bench/plans.py)."""
    if not explainable(statement.sql):
        return []
    return reads(statement.sql, statement.parameters, priced_out=False)


# Printing -----------------------------------------------------------------------------------


def _ratio(small: float, large: float, target: float = TARGET) -> str:
    ratio = large / small if small else float("inf")
    return f"{ratio:.2f}x, {'met' if ratio <= target else 'NOT MET'}"


def _reads(reads: list[Scan], growing: frozenset[str]) -> str:
    whole = sorted({str(scan) for scan in reads if scan.whole and scan.table in growing})
    return "; ".join(whole) if whole else "none"


def _print(
    args: argparse.Namespace, small: dict[str, Any], large: dict[str, Any], bursts: list[dict[str, Any]]
) -> None:
    people = f"{args.people:,}"
    growing = large["growing"]
    print("Rows, at 10 people and at", people)
    print(f"| table | 10 people | {people} people |")
    print("|---|---:|---:|")
    for table, count in large["rows"].items():
        print(f"| {table} | {small['rows'][table]:,} | {count:,} |")

    print(f"\nPeriodic jobs with nothing to do (p50 ms of {args.runs} runs; target <= {TARGET}x, no whole reads)")
    print(f"| job | 10 people | {people} people | ratio | statements | whole reads of growing tables |")
    print("|---|---:|---:|---:|---:|---|")
    for name, found in large["jobs"].items():
        before = small["jobs"][name]
        did = f" (did {found['did']})" if found["did"] else ""
        print(
            f"| {name}{did} | {before['p50']:.2f} | {found['p50']:.2f} | {_ratio(before['p50'], found['p50'])} "
            f"| {found['statements']} | {_reads(found['reads'], growing)} |"
        )

    for title, key in (("A turn's statements", "turn"), ("The pages' statements", "pages")):
        print(f"\n{title} (p50 ms over each call; target <= {TARGET}x, no whole reads); plan at {people}")
        print(f"| statement | calls | 10 people | {people} people | ratio | plan: tables read, and how |")
        print("|---|---:|---:|---:|---:|---|")
        for statement_key, statement in large[key].items():
            before = small[key].get(statement_key)
            shape = large["shapes"].get(statement_key, [])
            read = "; ".join(str(scan) for scan in shape) or "-"
            flagged = [str(scan) for scan in shape if scan.whole and scan.table in growing]
            marked = f"{read} **whole: {'; '.join(flagged)}**" if flagged else read
            small_ms = f"{before.p50:.3f}" if before else "-"
            ratio = _ratio(before.p50, statement.p50) if before else "-"
            print(
                f"| {label(statement)} | {len(statement.milliseconds)} | {small_ms} | {statement.p50:.3f} "
                f"| {ratio} | {marked} |"
            )
    made = small["turn_statements"], large["turn_statements"]
    print(f"\nStatements a turn makes: {made[0]:.1f} at 10 people, {made[1]:.1f} at {people}")

    print("\nPages (bytes, p50 ms)")
    print(f"| page | 10 people | {people} people | time ratio |")
    print("|---|---:|---:|---:|")
    for name, (size, ms) in large["page_figures"].items():
        small_size, small_ms = small["page_figures"][name]
        print(f"| {name} | {small_size:,} B, {small_ms:.1f} ms | {size:,} B, {ms:.1f} ms | {_ratio(small_ms, ms)} |")
    short, long = (large["page_figures"][f"conversation page, {n} exchanges"][0] for n in (SHORT, LONG))
    print(
        f"The conversation page at {LONG} exchanges is {_ratio(short, long)} its size at {SHORT} (target <= {TARGET}x)"
    )

    print(
        f"\nCPU per turn over HTTP, every process counted (mean ms of {args.pairs} alternated pairs; "
        f"target <= {CPU_TARGET}x its floor)"
    )
    print("| people | turn: bench, web, PostgreSQL, Redis = all | floor: the same | ratio |")
    print("|---|---|---|---:|")
    for name, found in (("10", small["cpu"]), (people, large["cpu"])):
        parts = (found["turn"], found["floor"])
        shown = [", ".join(f"{part[n]:.1f}" for n in ("bench", "web", "postgres", "redis")) for part in parts]
        print(
            f"| {name} | {shown[0]} = {sum(parts[0].values()):.1f} | {shown[1]} = {sum(parts[1].values()):.1f} "
            f"| {found['ratio']:.2f}x, {'met' if found['ratio'] <= CPU_TARGET else 'NOT MET'} |"
        )

    print(f"\nFirst words of chats at once, at {people} people (ms from posting; the model starts at once)")
    print(
        "| chats | p50 | p95 | added at p95 (less 1 chat's p50) | CPU the turns needed / cores "
        "| added / floor | streamed | unstreamed | failed |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    alone = bursts[0]["p50"]
    for found in bursts:
        added = found["p95"] - alone
        floor = found["app_cpu_ms"] / found["cores"]
        verdict = "" if found["chats"] != 50 else (", met" if added <= TARGET * floor else ", NOT MET")
        print(
            f"| {found['chats']} | {found['p50']:.0f} | {found['p95']:.0f} | {added:.0f} | {floor:.0f} "
            f"| {added / floor if floor else float('inf'):.2f}x{verdict} | {found['streamed']} "
            f"| {found['unstreamed']} | {found['failed']} |"
        )


if __name__ == "__main__":
    main()
