"""Planning the communication tier: who is due which email now, written into the ledger.

Nudges and check-ins are planned for everyone due at once (one statement each; the unique
key (user, kind, period) turns a repeated tick into a no-op), and only the new rows are
handed to workers, once the insert is committed. A session's recap and a week's episode
are planned from facts the chat leaves behind (a session summarised), never called for by
the chat.

The tasks that do the work (emails/tasks.py) call these services; these never import the
tasks. They publish them through the `Workers` that emails/apps.py hands in when the app
starts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from functools import cache
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone
from psycopg import sql

from coach.models import ChatSession
from coach.selectors import summarised_sessions_between
from emails import schedule
from emails.ledger import emails_release_dead
from emails.models import LOOK_AT_NEXT_TICK, Email, EmailPreference, WeeklyEpisodeRequest
from emails.schedule import SendingWindow, next_nudge_time, next_sending_time
from emails.selectors import (
    Plan,
    after_chat,
    check_in_plan,
    email_preference_for_user,
    episode_plan,
    nudge_plan,
    nudges_due_list,
    recaps_wanted,
)
from infra.llm import LLMError
from infra.rows import table, text
from memory.drafts import MemoryWriteError
from memory.episodes import SessionOfWeek, weekly_episode_save, weekly_episode_text
from memory.models import Memory
from memory.read_until import read_since, read_until_set
from memory.services import intentions_asked

if TYPE_CHECKING:
    from accounts.models import User

logger = logging.getLogger(__name__)

# Most emails the dispatcher hands out in one tick; the rest wait a minute for the next.
DISPATCH_BATCH = 5000
# Emails handed to workers one task each; a larger plan goes in batches (_hand_to_workers).
HAND_OUT_BATCH = 500
# How long after its summary a session may still get its recap: a recap that comes days
# late is no longer one (the planner was down; the moment passed).
RECAP_LOOKBACK = timedelta(days=1)
# How long a week asked for waits before it is asked again (doubling after each ask, to at
# most the longest): a little under the hourly tick at first, so the next tick asks again.
EPISODE_FIRST_PAUSE = timedelta(minutes=50)
EPISODE_LONGEST_PAUSE = timedelta(hours=12)
# Longer than any write (a completion and an embedding, with their retries), shorter than
# the first pause: a writer that died leaves the week to the next ask.
EPISODE_WRITE_LEASE = timedelta(minutes=15)
Status = Email.Status
Kind = Email.Kind


@dataclass(frozen=True)
class Workers:
    """How planning has workers do what it planned: each function publishes one task
    (emails/tasks.py defines them; emails/apps.py hands them in as the app starts)."""

    send_email: Callable[[int], object]
    hand_out_emails: Callable[[list[int]], object]
    write_weekly_episode: Callable[[int, str], object]


_workers: Workers | None = None


def workers_set(workers: Workers | None) -> None:
    """Tell planning how to publish its tasks (None: it cannot, and fails if it must)."""
    global _workers
    _workers = workers


def _workers_handed_in() -> Workers:
    if _workers is None:
        raise RuntimeError("emails.planning has no workers to hand work to: the emails app is not ready")
    return _workers


def sending_window() -> SendingWindow:
    return SendingWindow(settings.EMAIL_SENDING_WINDOW_START, settings.EMAIL_SENDING_WINDOW_END)


def check_ins_plan(*, now: datetime | None = None) -> int:
    """Plan a check-in for everyone with an intention coming up within the lead window
    (one a person at most, the soonest), and send them. Each intention asked about is
    marked so, in the same transaction: the next tick reads only the others. Returns how
    many were planned."""
    now = now or timezone.now()
    plan = check_in_plan(now=now, window=sending_window(), lead=timedelta(days=settings.MEMORY_PROSPECTIVE_LEAD_DAYS))

    def asked(rows: list[tuple[int, ...]]) -> None:
        intentions_asked(memory_ids=[memory_id for _, memory_id in rows], now=now)

    return _insert_and_send(_CHECK_INS_INSERT, plan, kind=Kind.CHECK_IN, now=now, then=asked)


def nudges_plan(*, now: datetime | None = None) -> int:
    """Plan a nudge for everyone due one now, whatever their number, in a bounded number
    of queries, and send them; then work out when each person it looked at is due next.
    Only the people on the due-list are read (EmailPreference.nudge_due_at), so a tick
    with nothing to do costs the same for any number of people. Returns how many were
    planned."""
    now = now or timezone.now()
    window = sending_window()
    planned = _insert_and_send(_NUDGES_INSERT, nudge_plan(now=now, window=window), kind=Kind.NUDGE, now=now)
    _nudge_times_worked_out(now=now, window=window)
    return planned


def _nudge_times_worked_out(*, now: datetime, window: SendingWindow) -> None:
    """For everyone on the due-list now (just planned, or not due after all: asleep, in
    quiet hours, nudged this period), the tick of their next nudge by the sending rule, or
    none. A time is written only over the one that was read: a change of theirs meanwhile
    (which sets now) wins."""
    worked_out = []
    wait_after_chat = after_chat()
    for due in nudges_due_list(now=now):
        later = None
        if due.facts is not None:
            try:
                later = next_nudge_time(
                    now,
                    due.facts,
                    window,
                    last_nudge_period=due.last_nudge_period,
                    planning_minutes=settings.EMAIL_NUDGE_PLANNING_MINUTES,
                    after_chat=wait_after_chat,
                )
            except ZoneInfoNotFoundError:
                # A zone nobody can read: no local time to email them at.
                later = None
        worked_out.append((later, due.preference_id, due.due_at))
    if worked_out:
        with connection.cursor() as cursor:
            cursor.executemany(
                "UPDATE emails_emailpreference SET nudge_due_at = %s WHERE id = %s AND nudge_due_at = %s", worked_out
            )


def session_recap_plan(*, session_id: int, now: datetime | None = None) -> Email | None:
    """After a session is summarised: its recap email, if the person asked for recaps.
    Sent at once, or kept for their next sending time when it is too late or too early."""
    now = now or timezone.now()
    session = ChatSession.objects.select_related("user").filter(pk=session_id).first()
    if session is None or not session.summary.strip():
        return None
    preference = email_preference_for_user(user=session.user)
    if not preference.chosen or not preference.session_summaries or preference.unsubscribed_at is not None:
        return None
    send_at = next_sending_time(now, preference.hours, sending_window())
    if send_at is None:
        return None
    send_now = send_at == now
    try:
        with transaction.atomic():
            email = Email.objects.create(
                user=session.user,
                kind=Kind.SESSION_SUMMARY,
                period_key=f"session-{session_id}",
                session=session,
                send_after=lease_from(now) if send_now else send_at,
                created_at=now,
            )
            if send_now:
                _send_on_commit([email.pk])
    except IntegrityError:
        # Planned already (the summary was written twice): that one stands.
        return None
    return email


def session_recaps_plan(*, now: datetime | None = None) -> int:
    """Every minute: a recap for each session summarised since the last tick (within
    RECAP_LOOKBACK) whose person asked for recaps and has none planned for it yet. A
    person's first conversation summarised puts them on the nudges' due-list: nudges
    wait until someone has chatted. Returns how many were planned."""
    now = now or timezone.now()
    since = read_since(RECAPS, now=now, lookback=RECAP_LOOKBACK)
    planned = 0
    for session_id in recaps_wanted(since=since):
        planned += session_recap_plan(session_id=session_id, now=now) is not None
    summarised = ChatSession.objects.filter(summarised_at__gte=since).values("user_id")
    EmailPreference.objects.filter(user_id__in=summarised, nudge_due_at__isnull=True).update(
        nudge_due_at=LOOK_AT_NEXT_TICK
    )
    read_until_set(RECAPS, now=now)
    return planned


# How far each planner has read the conversations summarised (memory/read_until.py): what
# it finds again it plans once (the ledger's and the weeks' unique keys see to that).
RECAPS, EPISODES = "recaps", "episodes"


def emails_dispatch_due(*, now: datetime | None = None) -> int:
    """Hand to workers the queued emails whose time has come: kept back by quiet hours,
    given back for a retry whose task was lost, whose task was lost, or whose sender died.
    Returns how many.

    First the claims whose sender died (its process gone, or its heartbeat silent: see
    emails/claims.py) are handed on: queued again, due now, if the end of the email had not
    gone, recorded sent-unconfirmed if it had. Run every few seconds, so such an email goes
    out again seconds after its sender died, drafting or sending."""
    now = now or timezone.now()
    emails_release_dead(now=now)
    with transaction.atomic():
        with connection.cursor() as cursor:
            # Each row handed out gets a new lease, so a second dispatcher (or the next
            # tick) leaves it alone while its task waits in the queue; SKIP LOCKED lets
            # two dispatchers split the work instead of queueing behind each other.
            cursor.execute(
                _dispatch_sql(),
                {"lease": lease_from(now), "queued": Status.QUEUED, "now": now, "batch": DISPATCH_BATCH},
            )
            due = [row[0] for row in cursor.fetchall()]
        _send_on_commit(due)
    return len(due)


def emails_worker_started(*, now: datetime | None = None) -> int:
    """A worker is starting, before it takes any task: the claims of senders that died (a
    predecessor on this host among them, whose process is gone) are handed on now, and
    what is due is handed out at once. Returns how many emails were handed out."""
    return emails_dispatch_due(now=now)


def weekly_episodes_plan(*, now: datetime | None = None) -> int:
    """Ask for every weekly episode due: a person's week whose Sunday evening has come, not
    yet written and not too old (emails/selectors.py says which). Each ask moves the week's
    next ask a growing pause on, so a write that failed or a task that was lost is asked
    for again at a later tick, and two planners never ask at once. Returns how many."""
    now = now or timezone.now()
    due_for = timedelta(days=settings.WEEKLY_EPISODE_DUE_DAYS)
    _weeks_to_write_up(now=now, due_for=due_for)
    # Past its window a week is asked for no more: done, so its row leaves the due-list.
    # Its Sunday evening was no later than its first ask, whatever the zone.
    WeeklyEpisodeRequest.objects.filter(done_at__isnull=True, next_ask_at__lt=now - due_for - timedelta(days=1)).update(
        done_at=now, claimed_at=None, error="not written in time"
    )
    plan = episode_plan(now=now, due_for=due_for)
    statement = _EPISODES_ASK.format(ctes=plan.ctes, requests=table(WeeklyEpisodeRequest), due=plan.due)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            text(statement),
            plan.parameters | {"first_pause": EPISODE_FIRST_PAUSE, "longest_pause": EPISODE_LONGEST_PAUSE},
        )
        asked = cursor.fetchall()
        transaction.on_commit(lambda: _ask_workers_to_write(asked))
    return len(asked)


def _weeks_to_write_up(*, now: datetime, due_for: timedelta) -> None:
    """Put on the due-list the week of each conversation summarised since the last tick,
    to be asked for from the person's Sunday evening; a week on it already stays as it is."""
    since = read_since(EPISODES, now=now, lookback=due_for + timedelta(days=8))
    weeks = {}
    summarised = ChatSession.objects.filter(summarised_at__gte=since)
    for user_id, last_message_at, zone in summarised.values_list("user_id", "last_message_at", "user__time_zone"):
        try:
            weeks[user_id, schedule.week_key(last_message_at, zone)] = schedule.episode_evening(last_message_at, zone)
        except ZoneInfoNotFoundError:
            # A zone nobody can read has no Sunday evening: its week is never asked for.
            continue
    WeeklyEpisodeRequest.objects.bulk_create(
        [
            WeeklyEpisodeRequest(user_id=user_id, week_key=week, created_at=now, attempts=0, next_ask_at=evening)
            for (user_id, week), evening in weeks.items()
        ],
        ignore_conflicts=True,
    )
    read_until_set(EPISODES, now=now)


def _ask_workers_to_write(weeks: list[tuple[int, str]]) -> None:
    write = _workers_handed_in().write_weekly_episode
    for user_id, week_key in weeks:
        write(user_id, week_key)


def weekly_episode_write(*, user_id: int, week_key: str, now: datetime | None = None) -> Memory | None:
    """Have the person's week (`week_key`, their local ISO week) written up as a weekly
    episode memory, from its summarised sessions, once. None when there is nothing to
    write, it is done already, another task is writing it, or the model failed (the error
    is kept, and the planner asks again after its pause)."""
    now = now or timezone.now()
    # Memory turned off since the week was asked for: nothing is written to it.
    user = get_user_model().objects.filter(pk=user_id, is_active=True, memory_enabled=True).first()
    if user is None:
        return None
    week, _ = WeeklyEpisodeRequest.objects.get_or_create(user=user, week_key=week_key, defaults={"created_at": now})
    rows = WeeklyEpisodeRequest.objects.filter(pk=week.pk, done_at__isnull=True)
    if week.done_at is not None:
        return None
    if Memory.objects.keyed(user.pk, week_key).exists():
        # Kept by a write that died before marking its week done: done now, never rewritten.
        rows.update(done_at=now, claimed_at=None)
        return None
    sessions = _sessions_of_week(user, week_key)
    # A claim, like an email's: of any number of tasks writing this week at once, one
    # asks the model and keeps the episode. One that died leaves its claim to lapse.
    lapsed = now - EPISODE_WRITE_LEASE
    if not sessions or not rows.filter(Q(claimed_at__isnull=True) | Q(claimed_at__lt=lapsed)).update(claimed_at=now):
        return None
    try:
        text = weekly_episode_text(week_key=week_key, sessions=sessions)
        episode = weekly_episode_save(user=user, key=week_key, text=text, now=now)
    except LLMError as error:
        logger.warning("the weekly episode %s of %s could not be written yet: %s", week_key, user_id, error)
        rows.update(claimed_at=None, error=f"the model failed: {error}")
        return None
    except MemoryWriteError as refused:
        # The store has no room a coach may take (fourteen episodes the person kept, say):
        # asking again would only have the model write it again for the same refusal.
        logger.info("the weekly episode %s of %s was not kept: %s", week_key, user_id, refused)
        rows.update(done_at=now, claimed_at=None, error=f"not kept: {refused}")
        return None
    rows.update(done_at=now, claimed_at=None, error="")
    return episode


def _sessions_of_week(user: User, week_key: str) -> list[SessionOfWeek]:
    zone = ZoneInfo(user.time_zone)
    _, year, week = week_key.split("-")
    start = datetime.combine(date.fromisocalendar(int(year), int(week), 1), time(0), tzinfo=zone)
    return [
        SessionOfWeek(day=f"{session.last_message_at.astimezone(zone):%A %Y-%m-%d}", summary=session.summary)
        for session in summarised_sessions_between(user=user, start=start, end=start + timedelta(days=7))
        # Only what is remembered: a session that is not remembered is never summarised.
        if session.summary.strip()
    ]


def emails_hand_out(*, email_ids: list[int]) -> int:
    """One send task per email of a planned batch (see _hand_to_workers)."""
    send = _workers_handed_in().send_email
    for email_id in email_ids:
        send(email_id)
    return len(email_ids)


def _insert_and_send(
    statement: sql.SQL,
    plan: Plan,
    *,
    kind: str,
    now: datetime,
    then: Callable[[list[tuple[int, ...]]], None] | None = None,
) -> int:
    """Insert the plan's set into the ledger with `statement` (one of the two below), have
    `then` see the rows it returned in the same transaction, and hand what it inserted to
    workers once committed."""
    composed = statement.format(
        ctes=plan.ctes, emails=table(Email), columns=_PLANNED_COLUMNS, values=_PLANNED_VALUES, due=plan.due
    )
    # Planned rows are sent at once: the lease keeps the dispatcher off them meanwhile.
    parameters = {"kind": kind, "queued": Status.QUEUED, "lease": lease_from(now), "now": now}
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(text(composed), plan.parameters | parameters)
        rows = cursor.fetchall()
        if then is not None and rows:
            then(rows)
        # Only the rows this statement created: a conflict (planned before) returns none.
        _send_on_commit([row[0] for row in rows])
    return len(rows)


def _send_on_commit(email_ids: list[int]) -> None:
    # A worker must never look for a row that is not committed yet.
    if email_ids:
        transaction.on_commit(lambda: _hand_to_workers(email_ids))


def _hand_to_workers(email_ids: list[int]) -> None:
    """Publish the emails' send tasks: up to HAND_OUT_BATCH one task each; beyond, one task
    per batch, which a worker fans out into one send task per email.

    Publishing a task to Redis costs a few milliseconds on a small machine (bench/emails.py:
    33,340 send tasks in 78-85 s on 2 cores), so a plan of 30,000 emails published one by
    one would hold its tick for over a minute; in batches, the tick publishes 60 and the
    rest is shared by every worker there is, in parallel."""
    workers = _workers_handed_in()
    if len(email_ids) <= HAND_OUT_BATCH:
        for email_id in email_ids:
            workers.send_email(email_id)
        return
    for start in range(0, len(email_ids), HAND_OUT_BATCH):
        workers.hand_out_emails(email_ids[start : start + HAND_OUT_BATCH])


def lease_from(now: datetime) -> datetime:
    # A task still in the queue after a visibility timeout was lost (Redis would have
    # handed an unacknowledged one to another worker by then): only then is it resent.
    return now + timedelta(seconds=settings.CELERY_VISIBILITY_TIMEOUT_SECONDS)


# The statements, put together from these constants and the models' table names only.
# Every value the models define, and every instant and pause, is a parameter; only a new
# row's starting values (0, 1, '') and the check-in period's prefix are written in.

# The columns a planned email is inserted with (a check-in adds its memory's), and its
# values after its user, kind and period: queued, leased, no attempt yet. The other
# columns take their defaults in the database, or stay NULL until sending fills them in.
_PLANNED_COLUMNS = sql.SQL(", ").join(
    map(
        sql.Identifier,
        (
            "user_id",
            "kind",
            "period_key",
            "status",
            "send_after",
            "attempts",
            "error",
            "embedding_model",
            "provider_message_id",
            "created_at",
            "updated_at",
        ),
    )
)
_PLANNED_VALUES = sql.SQL("%(queued)s, %(lease)s, 0, '', '', '', %(now)s, %(now)s")

# The period is the memory: one check-in per intention, however often this runs.
_CHECK_INS_INSERT = sql.SQL("""WITH {ctes}
    INSERT INTO {emails} ({columns}, memory_id)
    SELECT user_id, %(kind)s, 'memory-' || memory_id, {values}, memory_id FROM {due}
    ON CONFLICT ON CONSTRAINT email_once_per_user_kind_period DO NOTHING
    RETURNING id, memory_id""")

_NUDGES_INSERT = sql.SQL("""WITH {ctes}
    INSERT INTO {emails} ({columns})
    SELECT user_id, %(kind)s, period_key, {values} FROM {due}
    ON CONFLICT ON CONSTRAINT email_once_per_user_kind_period DO NOTHING
    RETURNING id""")

_EPISODES_ASK = sql.SQL("""WITH {ctes}
    INSERT INTO {requests} AS asked (user_id, week_key, created_at, attempts, next_ask_at, error)
    SELECT user_id, week_key, %(now)s, 1, %(now)s::timestamptz + %(first_pause)s, '' FROM {due}
    ON CONFLICT ON CONSTRAINT episode_once_per_user_week DO UPDATE
    SET attempts = asked.attempts + 1,
        next_ask_at = %(now)s::timestamptz + LEAST(%(first_pause)s * POWER(2, asked.attempts), %(longest_pause)s)
    -- Under the row's lock: a second planner that read the same week waits, then asks nothing.
    WHERE asked.done_at IS NULL AND asked.next_ask_at <= %(now)s
    RETURNING user_id, week_key""")


@cache
def _dispatch_sql() -> str:
    return text(
        sql.SQL("""UPDATE {emails} SET send_after = %(lease)s
        WHERE id IN (
            SELECT id FROM {emails}
            WHERE status = %(queued)s AND send_after <= %(now)s
            ORDER BY send_after
            LIMIT %(batch)s
            FOR UPDATE SKIP LOCKED
        )
        RETURNING id""").format(emails=table(Email))
    )
