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
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.setup import django_for_benchmarks

django_for_benchmarks()

from django.conf import settings  # noqa: E402
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
    log = StatementLog()
    bursts = tuple(int(n) for n in args.bursts.split(","))
    started = time.perf_counter()
    now = timezone.now()
    measured = people_add(0, 10, now=now)
    year_write(measured, now=now)
    pages = _conversations_to_show(User.objects.get(pk=measured[0]))
    settled()
    print(f"10 people built in {time.perf_counter() - started:.0f} s", flush=True)
    small = _measure(args, server, log, measured, pages)
    print(f"measured at 10 people, {time.perf_counter() - started:.0f} s in", flush=True)
    for first in range(10, args.people, COPY_BATCH):
        ids = people_add(first, min(COPY_BATCH, args.people - first), now=now)
        year_copy(measured[1], ids)
        print(f"  {first + len(ids):,} people", flush=True)
    settled()
    print(f"{args.people:,} people built, {time.perf_counter() - started:.0f} s in", flush=True)
    large = _measure(args, server, log, measured, pages)
    print(f"measured at {args.people:,} people, {time.perf_counter() - started:.0f} s in", flush=True)
    people = chatters(list(User.objects.order_by("pk").values_list("pk", flat=True)[10 : 10 + max(bursts)]))
    bursts_measured = first_words(server, people, bursts)
    print(f"bursts done, {time.perf_counter() - started:.0f} s in\n", flush=True)
    _print(args, small, large, bursts_measured)


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


# At each size --------------------------------------------------------------------------------


def _measure(
    args: argparse.Namespace, server: ModelServer, log: StatementLog, measured: list[int], pages: dict[int, int]
) -> dict[str, Any]:
    rows = rows_per_table()
    jobs = _jobs(log, args.runs)
    person = User.objects.get(pk=measured[0])
    turn_statements, turn_count = _turns(server, log, person, args.runs)
    page_statements, page_figures = _pages(log, person, pages, args.runs)
    cpu = cpu_against_floor(server, chatters([measured[2]])[0], args.pairs)
    growing = growing_tables()
    shapes = {key: _shape(s) for key, s in {**turn_statements, **page_statements}.items()}
    return {
        "rows": rows,
        "jobs": jobs,
        "turn": turn_statements,
        "turn_statements": turn_count,
        "pages": page_statements,
        "page_figures": page_figures,
        "shapes": shapes,
        "growing": growing,
        "cpu": cpu,
    }


def _shape(statement: Statement) -> list[Scan]:
    """The tables the statement reads, and how much of each, as the database runs it at
    this size (undone: bench/plans.py)."""
    if not explainable(statement.sql):
        return []
    return reads(statement.sql, statement.parameters, priced_out=False)


def _jobs(log: StatementLog, runs: int) -> dict[str, dict[str, Any]]:
    """Each periodic job with nothing to do: p50 ms, statements, and their plans' reads."""
    found = {}
    jobs: dict[str, Callable[[], object]] = {
        name: import_string(entry["task"]) for name, entry in settings.CELERY_BEAT_SCHEDULE.items()
    }
    jobs["web process sweep"] = lambda: turns_sweep(silent_seconds=settings.COACH_TURN_SILENT_SECONDS)
    for name, job in jobs.items():
        did = job()  # anything due is done now: what is timed is finding nothing
        log.clear()
        with log.recording():
            job()
        statements = list(log.statements.values())
        timings = []
        for _ in range(runs):
            began = time.perf_counter()
            job()
            timings.append((time.perf_counter() - began) * 1000)
        found[name] = {
            "p50": statistics.median(timings),
            "statements": len(statements),
            "did": did,
            "reads": [scan for s in statements for scan in _shape(s)],
        }
    return found


def _turns(server: ModelServer, log: StatementLog, person: User, runs: int) -> tuple[dict[Any, Statement], float]:
    """`runs` turns of a conversation the person holds, each as the browser takes it: every
    statement of theirs, timed, and how many a turn makes."""
    session = session_start(user=person)

    async def turns() -> None:
        client = AsyncClient()
        await client.aforce_login(person)
        for warm in range(3):
            server.queue_text(REPLY)
            await one_turn(client, session, -warm)
        log.clear()
        with log.recording():
            for number in range(runs):
                server.queue_text(REPLY)
                await one_turn(client, session, number)

    asyncio.run(turns())
    made = dict(log.statements)
    return made, sum(len(s.milliseconds) for s in made.values()) / runs


def _pages(
    log: StatementLog, person: User, pages: dict[int, int], runs: int
) -> tuple[dict[Any, Statement], dict[str, tuple[int, float]]]:
    """The conversation page at SHORT and LONG exchanges and the memory page: each one's
    statements, size in bytes and p50 ms."""
    client = Client()
    client.force_login(person)
    figures = {}
    log.clear()
    for name, path in (
        (f"conversation page, {SHORT} exchanges", f"/chat/{pages[SHORT]}/"),
        (f"conversation page, {LONG} exchanges", f"/chat/{pages[LONG]}/"),
        ("memory page", "/memories/"),
    ):
        client.get(path)
        timings = []
        for run_number in range(runs):
            began = time.perf_counter()
            if run_number == 0:
                with log.recording():
                    response = client.get(path)
            else:
                response = client.get(path)
            timings.append((time.perf_counter() - began) * 1000)
        assert response.status_code == 200, (path, response.status_code)
        figures[name] = (len(response.content), statistics.median(timings))
    return dict(log.statements), figures


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
