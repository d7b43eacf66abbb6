"""Costs that grow with the person, not with the database: PostgreSQL's plan (EXPLAIN, with
sequential scans priced out, so only what no index serves keeps one) for every statement of
every periodic job, with something to do and with nothing, and of a turn as the browser
takes it (a message posted, its reply streamed, the conversation's page), never reads a
table that grows with people whole (bench/plans.py says how that is read). bin/bench scale
measures the same statements at 10 and at 10,000 people."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client
from django.utils import timezone
from django.utils.module_loading import import_string

from accounts.models import User
from bench.plans import explainable, whole_reads
from bench.scale_world import people_add, year_copy, year_write
from bench.statement_log import Statement, StatementLog, label
from coach.claims import turns_sweep
from coach.services import session_start, session_summary_save
from emails.planning import EPISODES, RECAPS
from memory.maintenance import HISTORY_PRUNED
from memory.read_until import read_until_set
from offline_coach import ModelServer
from tests.coach.factories import make_session
from tests.coach.sse import events, post_form, session_cookie
from tests.emails.factories import prefer

CROWD = 100
# Every job Celery beat runs, by its schedule's name, and the sweep each web process runs.
JOBS: dict[str, Callable[[], object]] = {
    **{name: import_string(entry["task"]) for name, entry in settings.CELERY_BEAT_SCHEDULE.items()},
    "web process sweep": lambda: turns_sweep(silent_seconds=settings.COACH_TURN_SILENT_SECONDS),
}


@pytest.fixture
def crowd(user: User) -> User:
    """The person, with a year of use (bench/scale_world.py), among a hundred others with
    the same: tables large enough that PostgreSQL plans them as it plans a real database's."""
    now = timezone.now()
    year_write([user.pk], now=now)
    year_copy(user.pk, people_add(0, CROWD, now=now))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return user


def jobs_running_for_a_while() -> None:
    """Each job that reads rows that only grow read them a minute ago, as in a running app
    (a new app's first run reads a lookback's worth, once)."""
    for reader in (RECAPS, EPISODES, HISTORY_PRUNED):
        read_until_set(reader, now=timezone.now() - timedelta(minutes=1))


def whole_reads_of(log: StatementLog) -> list[str]:
    """Each statement recorded that reads a growing table whole, with what it reads so."""
    found = []
    for statement in log.statements.values():
        if explainable(statement.sql) and (reads := whole_reads(statement.sql, statement.parameters)):
            found.append(f"{label(statement)}: {'; '.join(map(str, reads))}\n  {statement.sql}")
    return found


@pytest.mark.django_db
def test_no_periodic_job_reads_a_table_that_grows_with_people_whole(crowd: User, model_server: ModelServer) -> None:
    # Something to do: an exchange waiting for the look-back's index, a conversation just
    # summarised, a person whose preferences just changed; then, run again, nothing.
    jobs_running_for_a_while()
    make_session(crowd, "My knee is better", "Good news.")
    session_summary_save(session=session_start(user=crowd), summary="The knee is better.")
    prefer(crowd, frequency="twice_weekly")
    found = []

    for name, job in JOBS.items():
        log = StatementLog()
        with log.recording():
            job()
            job()
        assert log.statements, f"{name} made no statement"
        found += [f"{name}: {read}" for read in whole_reads_of(log)]

    assert not found, "\n".join(found)


@pytest.mark.django_db(transaction=True)
def test_no_statement_of_a_turn_or_its_page_reads_a_table_that_grows_with_people_whole(
    crowd: User, live_app: str, client: Client, model_server: ModelServer
) -> None:
    client.force_login(crowd)
    cookie = session_cookie(client)
    session = session_start(user=crowd)
    log = StatementLog()

    with log.recording():
        for text in ("How was my week?", "And the next one?"):
            model_server.queue_text("A steady week: three runs and a rest day.")
            status, page = post_form(f"{live_app}/chat/{session.pk}/messages", {"text": text}, cookie=cookie)
            assert status == 200, page
            stream = re.search(r'data-stream-url="([^"]+)"', page).group(1)
            assert [name for name, _ in events(live_app + stream, cookie=cookie)][-1] == "done"
        assert client.get(f"/chat/{session.pk}/").status_code == 200

    made = {statement.name for statement in log.statements.values()}
    assert {"coach.statements.message_claimed", "coach.statements.reply_add_if_held"} <= made
    found = whole_reads_of(log)
    assert not found, "\n".join(found)


def statement(sql: str) -> Statement:
    return Statement("a statement of this test", sql, None)


@pytest.mark.django_db
def test_the_check_finds_a_whole_read_where_there_is_one(crowd: User) -> None:
    # The conversation's words are encrypted: no index could find a message by them.
    made = statement("SELECT id FROM coach_message WHERE content = 'hello'")
    # A conversation's recent messages, by its index of messages in order.
    served = statement("SELECT id FROM coach_message WHERE session_id = 1 ORDER BY id DESC LIMIT 5")
    log = StatementLog()
    log.statements = {("a", made.sql): made, ("b", served.sql): served}

    (found,) = whole_reads_of(log)

    assert "coach_message seq scan" in found and "WHOLE" in found and "content = 'hello'" in found
