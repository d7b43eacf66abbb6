"""Planning: who is due a nudge or a check-in, found for everyone at once in SQL, planned
once per period whatever the number of ticks, and handed to workers only once committed."""

from __future__ import annotations

import random
from datetime import UTC, datetime, time, timedelta

import pytest
from django.db import connection
from django.utils import timezone

import emails.planning
from accounts.models import User
from coach.models import ChatSession, Message
from emails.models import Email, EmailPreference
from emails.planning import check_ins_plan, nudges_plan
from emails.schedule import NudgeFacts, SendingHours, SendingWindow, nudge_due
from emails.selectors import after_chat, nudges_due
from tests.conftest import make_user
from tests.emails.factories import SETTLED_AT, make_email, prefer, settled
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db

WINDOW = SendingWindow(9, 20)
# A person who saved no preferences has chosen no frequency: neither rule emails them.
DEFAULTS = {"frequency": None, "quiet_start": time(21, 0), "quiet_end": time(8, 0), "time_zone": "UTC"}
ZONES = [
    "UTC",
    "Europe/Helsinki",
    "Europe/London",
    "America/New_York",
    "America/St_Johns",
    "Australia/Sydney",
    "Pacific/Chatham",
    "Pacific/Auckland",
    "Asia/Kathmandu",
    "Asia/Tokyo",
]
# Clock changes of 2026 in those zones, each with a few instants around it.
CLOCK_CHANGES = [
    datetime(2026, 3, 8, 7, 0, tzinfo=UTC),  # New York springs forward
    datetime(2026, 3, 29, 1, 0, tzinfo=UTC),  # Europe
    datetime(2026, 4, 4, 16, 0, tzinfo=UTC),  # Sydney falls back
    datetime(2026, 9, 26, 14, 0, tzinfo=UTC),  # Auckland and Chatham spring forward
    datetime(2026, 10, 25, 1, 0, tzinfo=UTC),  # Europe falls back
    datetime(2026, 11, 1, 6, 0, tzinfo=UTC),  # New York falls back
]
MONDAY_NOON = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def chatted(user: User) -> None:
    """The person wrote to their coach, long before the instants these tests plan at."""
    session = ChatSession.objects.create(user=user)
    Message.objects.create(session=session, role="user", content="Hello", status="answered")
    settled(user)


def due_now_in_utc(email: str) -> User:
    """Someone who has chatted, with default preferences in UTC: due at MONDAY_NOON."""
    person = make_user(email)
    prefer(person, time_zone="UTC")
    chatted(person)
    return person


def sent_ids(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The ids handed to the send task, in order (the task itself is not run)."""
    from emails.tasks import send_email

    handed: list[int] = []
    monkeypatch.setattr(send_email, "delay", handed.append)
    return handed


# The SQL and the pure rule ------------------------------------------------------------------


def test_the_planning_query_and_the_pure_rule_agree_on_who_is_due_across_clock_changes() -> None:
    rng = random.Random(48)
    people: dict[int, dict] = {}
    users: dict[int, User] = {}
    for number in range(160):
        person = make_user(f"person{number}@example.com")
        facts = dict(DEFAULTS)
        if rng.random() < 0.85:
            facts = {
                "frequency": rng.choice(["off", "weekly", "weekly", "twice_weekly"]),
                "quiet_start": time(rng.randrange(24), rng.choice([0, 15, 30, 45])),
                "quiet_end": time(rng.randrange(24), rng.choice([0, 15, 30, 45])),
                "time_zone": rng.choice(ZONES),
            }
            unsubscribed = rng.random() < 0.1
            prefer(person, **facts, unsubscribed_at=timezone.now() if unsubscribed else None)
            facts["unsubscribed"] = unsubscribed
        facts["chatted"] = rng.random() < 0.8
        if facts["chatted"]:
            chatted(person)
        facts["active"] = rng.random() < 0.95
        if not facts["active"]:
            User.objects.filter(pk=person.pk).update(is_active=False)
        people[person.pk], users[person.pk] = facts, person

    checked = 0
    for change in CLOCK_CHANGES:
        # Each person signed up and last wrote to their coach around this change, or long
        # before: some are in their first day, or with their coach, at some of the instants.
        for user_id, facts in people.items():
            facts["joined_at"] = change + timedelta(hours=rng.randrange(-80, 40)) if rng.random() < 0.3 else SETTLED_AT
            User.objects.filter(pk=user_id).update(date_joined=facts["joined_at"])
            facts["last_said_at"] = None
            if facts["chatted"]:
                facts["last_said_at"] = (
                    change + timedelta(minutes=rng.randrange(-60 * 60, 40 * 60)) if rng.random() < 0.4 else SETTLED_AT
                )
                ChatSession.objects.filter(user_id=user_id).update(last_message_at=facts["last_said_at"])
        # Emails of every kind in the days around this change, some within a gap, some not.
        Email.objects.all().delete()
        last: dict[int, datetime] = {}
        for user_id in people:
            for number in range(rng.choice([0, 1, 2])):
                kind = rng.choice(["nudge", "check_in", "session_summary"])
                created = change + timedelta(minutes=rng.randrange(-8 * 1440, 2 * 1440))
                make_email(users[user_id], kind=kind, period_key=f"{change:%Y%m%d}-{number}", created_at=created)
                if kind != "session_summary":
                    last[user_id] = max(created, last.get(user_id, created))
        for hours in range(-36, 37, 5):
            now = change + timedelta(hours=hours, minutes=rng.randrange(60))
            expected = set()
            for user_id, facts in people.items():
                person = NudgeFacts(
                    hours=SendingHours(facts["time_zone"], facts["quiet_start"], facts["quiet_end"]),
                    frequency=facts["frequency"],
                    unsubscribed=facts.get("unsubscribed", False),
                    has_chatted=facts["chatted"],
                    last_emailed_at=last.get(user_id),
                    joined_at=facts["joined_at"],
                    last_said_at=facts["last_said_at"],
                )
                # The pure rule knows nothing of accounts: a deactivated one is never emailed.
                if facts["active"] and (key := nudge_due(now, person, WINDOW, after_chat=after_chat())):
                    expected.add((user_id, key))

            found = {(due.user_id, due.period_key) for due in nudges_due(now=now, window=WINDOW)}

            assert found == expected, now
            checked += len(expected)
    # Agreement on empty sets would prove nothing.
    assert checked > 200


# Planning nudges ----------------------------------------------------------------------


def test_planning_twice_in_one_tick_plans_each_nudge_once(
    monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks
) -> None:
    handed = sent_ids(monkeypatch)
    ada, grace = due_now_in_utc("ada@example.com"), due_now_in_utc("grace@example.com")

    with django_capture_on_commit_callbacks(execute=True):
        assert nudges_plan(now=MONDAY_NOON) == 2
        assert nudges_plan(now=MONDAY_NOON) == 0
        assert nudges_plan(now=MONDAY_NOON + timedelta(minutes=15)) == 0

    planned = Email.objects.filter(kind="nudge")
    assert sorted(planned.values_list("user_id", "period_key")) == sorted(
        [(ada.pk, "2026-W49"), (grace.pk, "2026-W49")]
    )
    assert sorted(handed) == sorted(planned.values_list("pk", flat=True))


def test_only_the_rows_a_plan_created_are_handed_to_workers(
    monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks
) -> None:
    handed = sent_ids(monkeypatch)
    ada = due_now_in_utc("ada@example.com")
    # This week's nudge, planned long enough ago for the gap to have passed: it stands.
    earlier = make_email(ada, period_key="2026-W49", created_at=MONDAY_NOON - timedelta(days=7))
    due_now_in_utc("grace@example.com")

    with django_capture_on_commit_callbacks(execute=True):
        assert nudges_plan(now=MONDAY_NOON) == 1

    assert earlier.pk not in handed and len(handed) == 1


def test_the_workers_get_the_ids_only_once_the_plan_is_committed(
    monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks
) -> None:
    handed = sent_ids(monkeypatch)
    due_now_in_utc("ada@example.com")

    with django_capture_on_commit_callbacks() as callbacks:
        nudges_plan(now=MONDAY_NOON)
        assert handed == []

    for callback in callbacks:
        callback()
    assert len(handed) == 1


def test_a_large_plan_is_handed_out_in_batches_that_workers_fan_out(
    monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks
) -> None:
    from emails.tasks import hand_out_emails

    monkeypatch.setattr(emails.planning, "HAND_OUT_BATCH", 2)
    batches: list[list[int]] = []
    monkeypatch.setattr(hand_out_emails, "delay", batches.append)
    handed = sent_ids(monkeypatch)
    for number in range(5):
        due_now_in_utc(f"person{number}@example.com")

    with django_capture_on_commit_callbacks(execute=True):
        assert nudges_plan(now=MONDAY_NOON) == 5

    assert [len(batch) for batch in batches] == [2, 2, 1] and handed == []
    for batch in batches:
        hand_out_emails(batch)
    assert sorted(handed) == sorted(Email.objects.values_list("pk", flat=True))


def test_planning_costs_the_same_queries_for_3_and_for_30_people(django_assert_num_queries) -> None:
    for number in range(3):
        due_now_in_utc(f"few{number}@example.com")
    # Savepoint, the INSERT ... SELECT, release; then the due-list and its new times.
    with django_assert_num_queries(5) as few:
        assert nudges_plan(now=MONDAY_NOON) == 3

    for number in range(30):
        due_now_in_utc(f"many{number}@example.com")
    with django_assert_num_queries(len(few)):
        assert nudges_plan(now=MONDAY_NOON + timedelta(days=7)) == 33


def test_someone_who_never_chose_a_frequency_is_not_nudged_until_they_choose() -> None:
    person = make_user("ada@example.com")
    chatted(person)

    assert nudges_plan(now=MONDAY_NOON) == 0
    assert not EmailPreference.objects.filter(user=person).exists()

    prefer(person, frequency="weekly")
    assert nudges_plan(now=MONDAY_NOON) == 1


def test_nobody_is_nudged_who_unsubscribed_turned_emails_off_or_never_chatted() -> None:
    prefer(due_now_in_utc("gone@example.com"), unsubscribed_at=timezone.now())
    prefer(due_now_in_utc("off@example.com"), frequency="off")
    prefer(make_user("silent@example.com"), time_zone="UTC")

    assert nudges_plan(now=MONDAY_NOON) == 0


def test_a_zone_the_database_does_not_know_means_no_email_rather_than_a_failed_plan() -> None:
    prefer(due_now_in_utc("odd@example.com"), time_zone="localtime")
    due_now_in_utc("ada@example.com")

    assert nudges_plan(now=MONDAY_NOON) == 1


def test_no_nudge_lands_inside_quiet_hours_that_cross_midnight() -> None:
    # 10:30 UTC is 19:30 in Tokyo, when these people's quiet hours begin (until 07:00).
    evening = datetime(2026, 11, 30, 10, 30, tzinfo=UTC)

    def in_tokyo(email: str) -> EmailPreference:
        return prefer(due_now_in_utc(email), time_zone="Asia/Tokyo", quiet_start=time(19, 30), quiet_end=time(7, 0))

    quiet = in_tokyo("quiet@example.com")
    assert nudges_plan(now=evening) == 0
    # Looked at again at the first planning tick of Tokyo's next sending window, from 09:00
    # (after the quiet hours, which end at 07:00), and not before.
    quiet.refresh_from_db()
    assert quiet.nudge_due_at == datetime(2026, 12, 1, 0, 5, tzinfo=UTC)
    assert nudges_plan(now=quiet.nudge_due_at) == 1

    in_tokyo("just-in-time@example.com")
    assert nudges_plan(now=evening - timedelta(minutes=1)) == 1


# Check-ins ------------------------------------------------------------------------------


def test_several_intentions_coming_up_together_get_one_check_in_a_day(user: User) -> None:
    prefer(settled(user), time_zone="UTC")
    now = datetime(2026, 5, 20, 12, 0, tzinfo=UTC)
    talk = make_memory(user, "talk", tier="prospective", category="project", due_at=now + timedelta(days=10))
    make_memory(user, "race", tier="prospective", category="goal", due_at=now + timedelta(days=12))

    assert check_ins_plan(now=now) == 1
    assert check_ins_plan(now=now + timedelta(hours=23)) == 0
    assert check_ins_plan(now=now + timedelta(hours=24)) == 1

    assert list(Email.objects.order_by("pk").values_list("memory__key", flat=True)) == ["talk", "race"]
    assert Email.objects.get(memory=talk).period_key == f"memory-{talk.pk}"


def test_a_check_in_is_not_planned_for_someone_who_turned_emails_off(user: User) -> None:
    prefer(settled(user), time_zone="UTC", frequency="off")
    now = datetime(2026, 5, 20, 12, 0, tzinfo=UTC)
    make_memory(user, "talk", tier="prospective", category="project", due_at=now + timedelta(days=10))

    assert check_ins_plan(now=now) == 0


def test_planning_reads_the_database_clock_nowhere() -> None:
    # Every instant is a parameter: the same plan at the same `now` finds the same people,
    # whatever the database session's own time zone.
    due_now_in_utc("ada@example.com")
    with connection.cursor() as cursor:
        cursor.execute("SET TIME ZONE 'Pacific/Kiritimati'")
    try:
        assert [due.period_key for due in nudges_due(now=MONDAY_NOON, window=WINDOW)] == ["2026-W49"]
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET TIME ZONE 'UTC'")
