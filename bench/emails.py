"""Planning nudges at scale: one beat tick of plan_nudges over 1,000 and then 100,000
people, a third of them due (the others asleep in their time zone, or emailed lately).

    bin/bench emails [--users 100000]

Every person has preferences and one chat session. Planning must be set-based: the same
number of queries at 1,000 people as at 100,000, and well under 10 seconds for the tick,
handing the planned emails to Redis included. A large plan is handed out in batches that
workers fan out into one send task per email; that fan-out is timed too, on one process.
Prints a table; it is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import available_timezones

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.setup import django_for_benchmarks

django_for_benchmarks()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402
from psycopg import Cursor  # noqa: E402

from bench.queries import QueryCounter  # noqa: E402
from bench.stores import copy_people  # noqa: E402
from coach.wiring.celery import app  # noqa: E402
from emails.planning import emails_hand_out, nudges_plan  # noqa: E402
from emails.schedule import local_time  # noqa: E402
from emails.tasks import hand_out_emails, send_email  # noqa: E402
from infra.encryption import encrypt  # noqa: E402

GROUPS = ("due", "asleep", "emailed lately")


def zone_at_local_hour(now: datetime, hour: int) -> str:
    """A real time zone whose wall clock shows `hour` at the instant `now`."""
    return next(zone for zone in sorted(available_timezones()) if "/" in zone and local_time(now, zone).hour == hour)


class Publications:
    """What planning publishes to Redis (send tasks, or batches for workers to fan out), and
    the time it takes; the batches are kept, to time their fan-out afterwards."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.count = 0
        self.batches: list[list[int]] = []
        for task in (send_email, hand_out_emails):
            task.delay = self._timed(task.delay, keep=task is hand_out_emails)

    def _timed(self, publish: Callable[..., object], *, keep: bool) -> Callable[..., object]:
        def timed(*args: Any) -> object:
            started = time.perf_counter()
            result = publish(*args)
            self.seconds += time.perf_counter() - started
            self.count += 1
            if keep:
                self.batches.append(args[0])
            return result

        return timed

    def reset(self) -> None:
        self.seconds, self.count, self.batches = 0.0, 0, []


def seed_people(first: int, count: int, *, now: datetime) -> int:
    """People bench-<n>@example.com, each with preferences and a chat session with one
    message; every third is due, every third asleep, every third was nudged yesterday.
    Returns how many are due."""
    day_zone, night_zone = zone_at_local_hour(now, 14), zone_at_local_hour(now, 2)
    people = [
        (f"bench-{n}@example.com", night_zone if GROUPS[index % 3] == "asleep" else day_zone)
        for index, n in enumerate(range(first, first + count))
    ]
    with connection.connection.cursor() as cursor:
        ids = copy_people(cursor, people, now=now)
        _copy_a_conversation_each(cursor, ids, now=now)
        _copy_yesterdays_nudges(
            cursor, [user_id for index, user_id in enumerate(ids) if GROUPS[index % 3] == "emailed lately"], now=now
        )
    with connection.cursor() as cursor:
        for table in ("accounts_user", "emails_emailpreference", "coach_chatsession", "coach_message", "emails_email"):
            cursor.execute(f"ANALYZE {table}")
    return sum(1 for index in range(len(ids)) if GROUPS[index % 3] == "due")


def _copy_a_conversation_each(cursor: Cursor, ids: list[int], *, now: datetime) -> None:
    """Weekly emails wanted, and a conversation of one answered message, for each person."""
    empty, hello = encrypt(""), encrypt("Hello coach")
    with cursor.copy(
        "COPY emails_emailpreference (user_id, frequency, session_summaries, quiet_start, quiet_end, updated_at) "
        "FROM STDIN"
    ) as copy:
        for user_id in ids:
            copy.write_row([user_id, "weekly", False, "21:00", "08:00", now])
    # Every column without a value of the database's own: no prompt kept yet (coach/prompting.py).
    with cursor.copy(
        "COPY coach_chatsession (user_id, title, summary, created_at, updated_at, last_message_at, prompt, "
        "prompt_nonce, prompt_memory_tokens, prompt_remembers, prompt_version, prompt_builds, prompt_built_because) "
        "FROM STDIN"
    ) as copy:
        for user_id in ids:
            copy.write_row([user_id, empty, empty, now, now, now, empty, "", 0, False, "", 0, ""])
    cursor.execute("SELECT id FROM coach_chatsession WHERE user_id = ANY(%s) ORDER BY id", [ids])
    sessions = [row[0] for row in cursor.fetchall()]
    with cursor.copy(
        "COPY coach_message (session_id, role, content, status, error, claimed_by, created_at) FROM STDIN"
    ) as copy:
        for session_id in sessions:
            copy.write_row([session_id, "user", hello, "answered", "", "", now])


def _copy_yesterdays_nudges(cursor: Cursor, ids: list[int], *, now: datetime) -> None:
    yesterday = now - timedelta(days=1)
    with cursor.copy(
        "COPY emails_email (user_id, kind, period_key, status, send_after, attempts, error, embedding_model, "
        "provider_message_id, created_at, updated_at, sent_at) FROM STDIN"
    ) as copy:
        for user_id in ids:
            copy.write_row(
                [user_id, "nudge", "yesterday", "sent", yesterday, 1, "", "", "", yesterday, yesterday, yesterday]
            )


def measure(people: int, due: int, *, now: datetime, queries: QueryCounter, published: Publications) -> dict:
    before = queries.count
    published.reset()
    started = time.perf_counter()
    planned = nudges_plan(now=now)
    elapsed = time.perf_counter() - started
    figures = {
        "people": people,
        "due": due,
        "planned": planned,
        "queries": queries.count - before,
        "seconds": elapsed,
        "published": published.count,
        "publish_seconds": published.seconds,
    }
    # What the workers then do with the batches: one send task each, published.
    app.control.purge()
    published_by_plan = published.count
    started = time.perf_counter()
    for batch in published.batches:
        emails_hand_out(email_ids=batch)
    figures["fan_out_seconds"] = time.perf_counter() - started if published.batches else 0.0
    figures["fanned_out"] = published.count - published_by_plan
    # Put the ledger and the queue back as they were, for the next measurement.
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM emails_email WHERE kind = 'nudge' AND period_key <> 'yesterday'")
    app.control.purge()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=100_000)
    args = parser.parse_args()
    settings.DEBUG = False  # no query log kept in memory: the counter counts
    queries, published = QueryCounter(), Publications()
    now = timezone.now()
    app.control.purge()

    results = []
    seeded = due = 0
    for people in (1_000, args.users):
        started = time.perf_counter()
        for first in range(seeded, people, 10_000):
            due += seed_people(first, min(10_000, people - first), now=now)
        print(f"seeded {people - seeded:,} people in {time.perf_counter() - started:.1f} s", flush=True)
        seeded = people
        results.append(measure(people, due, now=now, queries=queries, published=published))

    print()
    print(
        "| people | due | planned | queries | plan_nudges (s) | of which publishing (s) | tasks published "
        "| then, fanned out by workers (s, on one) |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in results:
        print(
            f"| {row['people']:,} | {row['due']:,} | {row['planned']:,} | {row['queries']} | {row['seconds']:.2f} "
            f"| {row['publish_seconds']:.2f} | {row['published']:,} "
            f"| {row['fan_out_seconds']:.2f} ({row['fanned_out']:,} tasks) |"
        )


if __name__ == "__main__":
    main()
