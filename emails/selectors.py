"""Reading the ledger and finding who is due an email.

The per-person reads take `user=` and read only that person's rows. The planning reads
are set-based: one statement finds everyone due at once, whatever the number of people,
and states emails/schedule.py's rule again in SQL: the person's wall clock is
`now AT TIME ZONE their_zone`, exactly what zoneinfo computes in Python (a test holds
the two to agreement over a generated population).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Exists, OuterRef, QuerySet, Subquery
from pgvector.django import CosineDistance
from psycopg import sql

from coach.models import ChatSession, Message
from emails.models import WENT_OUT, Email, EmailPreference, WeeklyEpisodeRequest
from emails.schedule import (
    CHECK_IN_MIN_GAP,
    EPISODE_LOCAL_HOUR,
    EPISODE_LOCAL_WEEKDAY,
    FIRST_DAY,
    MIN_GAP,
    NudgeFacts,
    SendingWindow,
    next_nudge_time,
)
from infra.rows import table, text
from memory.context import SentEmail
from memory.models import Memory, ProspectiveStatus, Tier

if TYPE_CHECKING:
    from accounts.models import User

# How many of the last emails a draft is compared with and is shown, so none repeats them.
LAST_EMAILS = 5
# Coach-initiated emails: the ones a person's frequency and the gaps between emails govern.
UNPROMPTED_KINDS = (Email.Kind.NUDGE, Email.Kind.CHECK_IN)
# What a prompt quotes of an email: its kind, subject, first line and date. The rest (the
# HTML, the embedding, the sending's bookkeeping) is neither read nor decrypted.
QUOTED = ("kind", "subject", "body_text", "sent_at", "created_at")


@dataclass(frozen=True)
class DueNudge:
    user_id: int
    period_key: str


def emails_sent_to_user(*, user: User) -> QuerySet[Email]:
    """The communication tier: every email sent to the person, newest first (no vectors,
    no HTML loaded). One sent-unconfirmed counts: the server most likely delivered it."""
    return (
        Email.objects.filter(user=user, status__in=WENT_OUT)
        .defer("embedding", "body_html")
        .order_by("-sent_at", "-created_at", "-pk")
    )


def emails_recently_sent(*, user: User, limit: int = LAST_EMAILS) -> list[Email]:
    """The person's last sent emails, newest first, whole: what a draft is compared with
    (emails/drafting.py). A prompt quotes the same emails, read as emails_sent_lately."""
    return list(emails_sent_to_user(user=user)[:limit])


def emails_sent_lately(*, user: User, limit: int = LAST_EMAILS) -> list[Email]:
    """emails_recently_sent with only what a prompt quotes, read as a conversation's
    prompt is assembled."""
    return list(emails_sent_to_user(user=user).only(*QUOTED)[:limit])


def sent_emails_for_prompt(user: User) -> list[SentEmail]:
    """The last emails sent to the person as a prompt's memory block quotes them."""
    return [quoted(email) for email in emails_sent_lately(user=user)]


def quoted(email: Email) -> SentEmail:
    """An email as a prompt quotes it."""
    return SentEmail(
        sent_on=email.when.date(),
        kind=email.get_kind_display(),
        subject=email.subject or "",
        first_line=email.first_line,
    )


def email_closest_sent(*, user: User, vector: list[float], model: str) -> tuple[Email, float] | None:
    """Of every email sent to the person and embedded by `model`, the one most like
    `vector`, with its cosine similarity; None when there is none to compare with.

    All of them, not the last few: a nudge like one sent two months ago repeats itself
    just the same. An exact scan of one person's emails (a few a week), like memory search."""
    closest = (
        Email.objects.filter(user=user, status__in=WENT_OUT, embedding_model=model, embedding__isnull=False)
        .defer("embedding", "body_html")
        .annotate(distance=CosineDistance("embedding", vector))
        .order_by("distance", "pk")
        .first()
    )
    return None if closest is None else (closest, round(1.0 - float(closest.distance), 4))


def email_for_sending(*, email_id: int) -> Email | None:
    return Email.objects.select_related("user", "memory", "session").filter(pk=email_id).first()


def email_preference_for_user(*, user: User) -> EmailPreference:
    """The person's preferences as they stand now; the defaults, unsaved, until first saved."""
    preference = EmailPreference.objects.filter(user=user).first() or EmailPreference(user=user)
    # The caller's user object: reading their zone off the preference costs no query.
    preference.user = user
    return preference


def next_nudge_for_user(*, user: User, now: datetime, window: SendingWindow) -> datetime | None:
    """When the person's next nudge will be planned, by the sending rule (emails/schedule.py)
    over what the ledger and the chat hold of them; None when no nudge is coming."""
    preference = email_preference_for_user(user=user)
    unprompted = Email.objects.filter(user=user, kind__in=UNPROMPTED_KINDS).order_by("-created_at", "-pk")
    last_emailed = unprompted.values_list("created_at", flat=True).first()
    last_nudge_period = unprompted.filter(kind=Email.Kind.NUDGE).values_list("period_key", flat=True).first()
    person = NudgeFacts(
        hours=preference.hours,
        frequency=preference.frequency,
        unsubscribed=preference.unsubscribed_at is not None,
        has_chatted=has_chatted(user=user),
        last_emailed_at=last_emailed,
        joined_at=user.date_joined,
        last_said_at=last_said_at(user=user),
    )
    return next_nudge_time(
        now,
        person,
        window,
        last_nudge_period=last_nudge_period,
        planning_minutes=settings.EMAIL_NUDGE_PLANNING_MINUTES,
        after_chat=after_chat(),
    )


@dataclass(frozen=True)
class NudgeDue:
    """A person at or past their nudge's due time (emails/models.py), as planning read them."""

    preference_id: int
    # As read: a time worked out for them is written only over this one, never over the
    # "now" a change of theirs set meanwhile.
    due_at: datetime
    # None when no nudge can come: they are not active, or their memory is off.
    facts: NudgeFacts | None
    last_nudge_period: str | None


def nudges_due_list(*, now: datetime) -> list[NudgeDue]:
    """Everyone on the nudges' due-list at `now`, with what decides their next nudge, in one
    statement through the due-list's index."""
    unprompted = Email.objects.filter(user_id=OuterRef("user_id"), kind__in=UNPROMPTED_KINDS).order_by(
        "-created_at", "-pk"
    )
    chatted = ChatSession.objects.filter(user_id=OuterRef("user_id"), remembered=True, messages__role=Message.Role.USER)
    talks = ChatSession.objects.filter(user_id=OuterRef("user_id"), last_message_at__isnull=False)
    rows = (
        EmailPreference.objects.filter(nudge_due_at__lte=now)
        .select_related("user")
        .annotate(
            last_emailed_at=Subquery(unprompted.values("created_at")[:1]),
            last_nudge_period=Subquery(unprompted.filter(kind=Email.Kind.NUDGE).values("period_key")[:1]),
            has_chatted=Exists(chatted),
            last_said_at=Subquery(talks.order_by("-last_message_at").values("last_message_at")[:1]),
        )
        .order_by("pk")
    )
    found = []
    for row in rows:
        assert row.nudge_due_at is not None  # on the due-list
        can_come = row.user.is_active and row.user.memory_enabled
        facts = NudgeFacts(
            hours=row.hours,
            frequency=row.frequency,
            unsubscribed=row.unsubscribed_at is not None,
            has_chatted=row.has_chatted,
            last_emailed_at=row.last_emailed_at,
            joined_at=row.user.date_joined,
            last_said_at=row.last_said_at,
        )
        found.append(NudgeDue(row.pk, row.nudge_due_at, facts if can_come else None, row.last_nudge_period))
    return found


def after_chat() -> timedelta:
    """How long after a person's last message no follow-up reaches them (emails/schedule.py,
    rule 4): EMAIL_WAIT_AFTER_CHAT_HOURS, and never less than a conversation takes to end
    idle, so none comes while they are in one."""
    return max(
        timedelta(hours=settings.EMAIL_WAIT_AFTER_CHAT_HOURS), timedelta(minutes=settings.COACH_SESSION_IDLE_MINUTES)
    )


def last_said_at(*, user: User) -> datetime | None:
    """When the person last wrote to their coach, in any conversation."""
    newest = (
        ChatSession.objects.filter(user=user).order_by("-last_message_at").values_list("last_message_at", flat=True)
    )
    return newest.first()


def has_chatted(*, user: User) -> bool:
    """Whether the person has written to their coach at least once in a conversation that
    is remembered (nudges wait for it; one not remembered leaves nothing to act on)."""
    return ChatSession.objects.filter(user=user, remembered=True, messages__role=Message.Role.USER).exists()


def recaps_wanted(*, since: datetime) -> list[int]:
    """Sessions summarised since `since` whose person wants recaps and may be emailed,
    and that have no recap planned yet: the ids, oldest summary first."""
    wants = EmailPreference.objects.filter(
        user=OuterRef("user"), frequency__isnull=False, session_summaries=True, unsubscribed_at__isnull=True
    )
    planned = Email.objects.filter(kind=Email.Kind.SESSION_SUMMARY, session=OuterRef("pk"))
    return list(
        ChatSession.objects.filter(summarised_at__gte=since)
        .filter(Exists(wants))
        .exclude(Exists(planned))
        .order_by("summarised_at", "pk")
        .values_list("pk", flat=True)
    )


# Planning, for everyone at once ---------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """Common table expressions that end in one named set of people due something, with
    their parameters: a selector reads the set, a service inserts it into the ledger."""

    ctes: sql.Composable
    due: sql.Identifier
    parameters: dict[str, Any]

    def select(self, *names: str) -> list[tuple[Any, ...]]:
        """The named columns of the set, for every row of it."""
        statement = sql.SQL("WITH {ctes} SELECT {names} FROM {due}").format(
            ctes=self.ctes, names=sql.SQL(", ").join(map(sql.Identifier, names)), due=self.due
        )
        with connection.cursor() as cursor:
            cursor.execute(text(statement), self.parameters)
            rows: list[tuple[Any, ...]] = cursor.fetchall()
        return rows


# The statements below are put together from these constants and the models' table names
# only. Every value the app's models define (kinds, roles, tiers, statuses, the preference
# defaults) and every number of the rule is a parameter; only date formats and the
# period keys' own prefixes and suffixes ('IYYY-IW', 'week-', '-1') are written in.

# Each active person with their preferences (the model's defaults where they saved none)
# and their wall clock now. A zone PostgreSQL does not know leaves the clock NULL, so
# every comparison with it is false: nobody is emailed at a local time we cannot tell.
# Likewise a frequency never chosen stays NULL: nobody is emailed before they chose.
# {only} narrows it to a plan's due-list, read through its index.
_PEOPLE = sql.SQL("""people AS (
    SELECT u.id AS user_id,
           p.frequency,
           COALESCE(p.quiet_start, %(default_quiet_start)s::time) AS quiet_start,
           COALESCE(p.quiet_end, %(default_quiet_end)s::time) AS quiet_end,
           p.unsubscribed_at,
           zone.name AS time_zone,
           u.date_joined AS joined_at,
           CASE WHEN zone.name IS NOT NULL THEN %(now)s::timestamptz AT TIME ZONE zone.name END AS local_now
    FROM {users} u
    LEFT JOIN {preferences} p ON p.user_id = u.id
    LEFT JOIN pg_timezone_names zone ON zone.name = u.time_zone
    -- With memory off the coach sends nothing drawn on memory: no nudge, no check-in,
    -- no weekly episode.
    WHERE u.is_active AND u.memory_enabled {only}
)""")
# Nudges: only those at or past the time their next nudge may come (their due-list).
_NUDGE_DUE_LIST = sql.SQL("AND p.nudge_due_at <= %(now)s")
# Weekly episodes: only those with a week not written up whose time to ask has come.
_EPISODE_DUE_LIST = sql.SQL("""AND u.id IN (
        SELECT asked.user_id FROM {requests} asked WHERE asked.done_at IS NULL AND asked.next_ask_at <= %(now)s
    )""")

# emails/schedule.py's may_email_at: inside the sending window, outside quiet hours
# [start, end), which cross midnight when start > end; equal ends mean none.
_MAY_EMAIL_NOW = sql.SQL("""EXTRACT(HOUR FROM people.local_now) >= %(window_start)s
    AND EXTRACT(HOUR FROM people.local_now) < %(window_end)s
    AND NOT CASE
        WHEN people.quiet_start < people.quiet_end
            THEN people.local_now::time >= people.quiet_start AND people.local_now::time < people.quiet_end
        WHEN people.quiet_start > people.quiet_end
            THEN people.local_now::time >= people.quiet_start OR people.local_now::time < people.quiet_end
        ELSE false
    END""")

# No nudge or check-in planned for the person within the {gap}, whatever became of it.
_NO_UNPROMPTED_EMAIL_WITHIN = sql.SQL("""NOT EXISTS (
        SELECT 1 FROM {emails} earlier
        WHERE earlier.user_id = people.user_id
          AND earlier.kind = ANY(%(unprompted_kinds)s)
          AND earlier.created_at > %(now)s::timestamptz - ({gap})
    )""")

# emails/schedule.py's with_their_coach (rule 4), negated: past their first day, and not in
# a conversation nor within %(after_chat)s of the last message they wrote (a conversation's
# last_message_at is when its person last wrote in it).
_NOT_WITH_THEIR_COACH = sql.SQL("""people.joined_at <= %(now)s::timestamptz - %(first_day)s
      AND NOT EXISTS (
          SELECT 1 FROM {sessions} talk
          WHERE talk.user_id = people.user_id AND talk.last_message_at > %(now)s::timestamptz - %(after_chat)s
      )""")

_NUDGE_GAP = sql.SQL(
    "CASE people.frequency WHEN %(weekly)s THEN %(weekly_gap)s WHEN %(twice_weekly)s THEN %(twice_weekly_gap)s END"
)

_DUE_NUDGES = sql.SQL("""due_nudges AS (
    SELECT people.user_id,
           TO_CHAR(people.local_now, 'IYYY-"W"IW')
           || CASE WHEN people.frequency = %(twice_weekly)s
                   THEN CASE WHEN EXTRACT(ISODOW FROM people.local_now) <= 3 THEN '-1' ELSE '-2' END
                   ELSE '' END AS period_key
    FROM people
    WHERE people.frequency IN (%(weekly)s, %(twice_weekly)s)
      AND people.unsubscribed_at IS NULL
      AND {may_email_now}
      AND {no_unprompted_email_within}
      AND {not_with_their_coach}
      AND EXISTS (
          SELECT 1 FROM {sessions} session
          JOIN {messages} message ON message.session_id = session.id
          WHERE session.user_id = people.user_id AND session.remembered AND message.role = %(user_role)s
      )
)""")

_DUE_CHECK_INS = sql.SQL("""due_check_ins AS (
    SELECT DISTINCT ON (memory.user_id) memory.user_id, memory.id AS memory_id
    FROM {memories} memory
    JOIN people ON people.user_id = memory.user_id
    WHERE memory.tier = %(prospective)s
      AND memory.status = %(open)s
      AND memory.due_at > %(now)s
      AND memory.due_at <= %(now)s::timestamptz + %(lead)s
      AND people.frequency IS NOT NULL
      AND people.frequency <> %(off)s
      AND people.unsubscribed_at IS NULL
      AND {may_email_now}
      AND {no_unprompted_email_within}
      AND {not_with_their_coach}
      -- One check-in per intention, ever: one that was planned and failed does not
      -- stand in the way of the next. Those asked about are marked so (their due-list).
      AND memory.asked_at IS NULL
      AND NOT EXISTS (
          SELECT 1 FROM {emails} asked
          WHERE asked.memory_id = memory.id AND asked.kind = %(check_in)s
      )
    ORDER BY memory.user_id, memory.due_at, memory.id
)""")

# Each person's weeks on the due-list (a week is put on it when one of its conversations is
# summarised, emails/planning.py) whose Sunday evening (EPISODE_LOCAL_WEEKDAY, from
# EPISODE_LOCAL_HOUR, their clock) has come within the last %(episode_due_for)s: `ready` is
# how far into its week that evening falls. A week is due while it had a summarised session
# and is neither done nor waiting out the pause after its last ask.
_DUE_EPISODES = sql.SQL("""due_episodes AS (
    SELECT people.user_id, asked.week_key
    FROM {requests} asked
    JOIN people ON people.user_id = asked.user_id
    CROSS JOIN LATERAL (SELECT TO_DATE(SUBSTR(asked.week_key, 6), 'IYYY-IW')::timestamp AS start) AS week
    WHERE asked.done_at IS NULL
      AND asked.next_ask_at <= %(now)s
      AND week.start + %(episode_ready)s <= people.local_now
      AND week.start + %(episode_ready)s + %(episode_due_for)s > people.local_now
      AND EXISTS (
          SELECT 1 FROM {sessions} session
          WHERE session.user_id = people.user_id
            AND session.summarised_at IS NOT NULL
            AND session.last_message_at >= week.start AT TIME ZONE people.time_zone
            AND session.last_message_at < (week.start + INTERVAL '7 days') AT TIME ZONE people.time_zone
      )
)""")


@dataclass(frozen=True)
class _Expressions:
    nudges: sql.Composed
    check_ins: sql.Composed
    episodes: sql.Composed


@cache
def _expressions() -> _Expressions:
    """Each plan's expressions, composed once from the constants above and the models' tables."""
    emails, sessions, requests = table(Email), table(ChatSession), table(WeeklyEpisodeRequest)

    def people(only: sql.Composable) -> sql.Composed:
        return _PEOPLE.format(users=table(get_user_model()), preferences=table(EmailPreference), only=only)

    not_with_their_coach = _NOT_WITH_THEIR_COACH.format(sessions=sessions)
    due_nudges = _DUE_NUDGES.format(
        may_email_now=_MAY_EMAIL_NOW,
        no_unprompted_email_within=_NO_UNPROMPTED_EMAIL_WITHIN.format(emails=emails, gap=_NUDGE_GAP),
        not_with_their_coach=not_with_their_coach,
        sessions=sessions,
        messages=table(Message),
    )
    due_check_ins = _DUE_CHECK_INS.format(
        memories=table(Memory),
        may_email_now=_MAY_EMAIL_NOW,
        no_unprompted_email_within=_NO_UNPROMPTED_EMAIL_WITHIN.format(
            emails=emails, gap=sql.Placeholder("check_in_gap")
        ),
        not_with_their_coach=not_with_their_coach,
        emails=emails,
    )
    due_episodes = _DUE_EPISODES.format(sessions=sessions, requests=requests)
    return _Expressions(
        nudges=sql.SQL(", ").join([people(_NUDGE_DUE_LIST), due_nudges]),
        check_ins=sql.SQL(", ").join([people(sql.SQL("")), due_check_ins]),
        episodes=sql.SQL(", ").join([people(_EPISODE_DUE_LIST.format(requests=requests)), due_episodes]),
    )


def _parameters(now: datetime, window: SendingWindow | None = None, lead: timedelta | None = None) -> dict[str, Any]:
    """The rule's constants and the person model's defaults, as statement parameters."""
    defaults = {field.name: field.default for field in EmailPreference._meta.concrete_fields}
    Frequency = EmailPreference.Frequency
    parameters: dict[str, Any] = {
        "now": now,
        "default_quiet_start": defaults["quiet_start"],
        "default_quiet_end": defaults["quiet_end"],
        "weekly": Frequency.WEEKLY.value,
        "twice_weekly": Frequency.TWICE_WEEKLY.value,
        "off": Frequency.OFF.value,
        "check_in": Email.Kind.CHECK_IN.value,
        "user_role": Message.Role.USER.value,
        "prospective": Tier.PROSPECTIVE.value,
        "open": ProspectiveStatus.OPEN.value,
        "weekly_gap": MIN_GAP[Frequency.WEEKLY],
        "twice_weekly_gap": MIN_GAP[Frequency.TWICE_WEEKLY],
        "check_in_gap": CHECK_IN_MIN_GAP,
        "unprompted_kinds": [kind.value for kind in UNPROMPTED_KINDS],
        "episode_ready": timedelta(days=EPISODE_LOCAL_WEEKDAY - 1, hours=EPISODE_LOCAL_HOUR),
        "first_day": FIRST_DAY,
        "after_chat": after_chat(),
    }
    if window is not None:
        parameters |= {"window_start": window.start_hour, "window_end": window.end_hour}
    if lead is not None:
        parameters["lead"] = lead
    return parameters


def nudge_plan(*, now: datetime, window: SendingWindow) -> Plan:
    """Everyone due a nudge at `now` (`due_nudges`: user_id, period_key)."""
    return Plan(_expressions().nudges, sql.Identifier("due_nudges"), _parameters(now, window))


def check_in_plan(*, now: datetime, window: SendingWindow, lead: timedelta) -> Plan:
    """Everyone to be asked now about an intention coming up, its soonest one each
    (`due_check_ins`: user_id, memory_id)."""
    return Plan(_expressions().check_ins, sql.Identifier("due_check_ins"), _parameters(now, window, lead))


def episode_plan(*, now: datetime, due_for: timedelta) -> Plan:
    """Every person's weeks due a weekly episode (`due_episodes`: user_id, week_key): their
    Sunday evening came within `due_for`, they had a summarised session, and the week is
    not done nor waiting for its next ask."""
    parameters = _parameters(now) | {"episode_due_for": due_for}
    return Plan(_expressions().episodes, sql.Identifier("due_episodes"), parameters)


def nudges_due(*, now: datetime, window: SendingWindow) -> list[DueNudge]:
    rows = nudge_plan(now=now, window=window).select("user_id", "period_key")
    return [DueNudge(user_id, period_key) for user_id, period_key in rows]
