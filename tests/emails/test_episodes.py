"""Weekly episodes: from a person's Sunday evening on, the model summarises their week's
sessions into a `category=episode` memory; the eviction policy keeps the newest 14.

A week is due until it is written (a due-list read from the data at each hourly tick):
a write that failed or a task that was lost is asked for again at a later tick, after
a growing pause, until the week is WEEKLY_EPISODE_DUE_DAYS past its Sunday evening; each
week is written once, however many workers write it; one the person deleted, never again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.db import connection

from accounts.models import User
from coach.models import ChatSession
from emails.models import WeeklyEpisodeRequest
from emails.planning import weekly_episode_write, weekly_episodes_plan
from memory.models import Memory, MemoryEvent
from memory.services import memory_delete
from offline_coach import ModelServer
from tests.emails.factories import at, prefer
from tests.memory.factories import memory_named

pytestmark = pytest.mark.django_db

HELSINKI = "Europe/Helsinki"
SUNDAY_EVENING = at(HELSINKI, 2026, 11, 29, 20, 30)
EPISODE = "Subject: -\n\nThree runs and a strong tempo run; the knee held up."


def session_on(user: User, when: datetime, summary: str) -> ChatSession:
    return ChatSession.objects.create(
        user=user, created_at=when, last_message_at=when, ended_at=when, summary=summary, summarised_at=when
    )


@pytest.fixture
def plan(django_capture_on_commit_callbacks) -> Callable[[datetime], int]:
    """weekly_episodes_plan, committed: the writes it asks for are enqueued on commit."""

    def run(now: datetime) -> int:
        with django_capture_on_commit_callbacks(execute=True):
            return weekly_episodes_plan(now=now)

    return run


@pytest.fixture
def week(user: User) -> list[ChatSession]:
    prefer(user, time_zone=HELSINKI)
    return [
        session_on(user, at(HELSINKI, 2026, 11, 23, 18), "They planned three runs and a long one on Saturday."),
        session_on(user, at(HELSINKI, 2026, 11, 26, 7), "The knee held up on the tempo run; they felt strong."),
    ]


def test_on_their_sunday_evening_a_persons_week_is_written_as_an_episode(
    user: User, week: list[ChatSession], model_server: ModelServer, celery_eager: None, plan: Callable[[datetime], int]
) -> None:
    assert plan(SUNDAY_EVENING) == 1

    episode = memory_named(user, "week-2026-48")
    assert (episode.tier, episode.category, episode.source) == ("episodic", "episode", "coach")
    request = model_server.chat_requests()[-1]
    assert ModelServer.system_prompt(request).startswith("# Weekly episode")
    assert request["messages"][-1]["content"].splitlines() == [
        "The sessions of week 2026-48:",
        "- Monday 2026-11-23: They planned three runs and a long one on Saturday.",
        "- Thursday 2026-11-26: The knee held up on the tempo run; they felt strong.",
    ]
    assert episode.content and len(episode.summary) <= 150


def test_a_week_is_written_up_once_and_not_before_sunday_evening(
    user: User, week: list[ChatSession], model_server: ModelServer, celery_eager: None, plan: Callable[[datetime], int]
) -> None:
    assert plan(SUNDAY_EVENING - timedelta(minutes=31)) == 0
    assert plan(SUNDAY_EVENING) == 1
    assert plan(SUNDAY_EVENING + timedelta(hours=1)) == 0

    assert Memory.objects.filter(user=user, category="episode").count() == 1
    assert len(model_server.chat_requests()) == 1
    assert list(WeeklyEpisodeRequest.objects.values_list("user", "week_key")) == [(user.pk, "week-2026-48")]


def test_a_week_without_a_session_writes_nothing(
    user: User, model_server: ModelServer, celery_eager: None, plan: Callable[[datetime], int]
) -> None:
    prefer(user, time_zone=HELSINKI)
    session_on(user, at(HELSINKI, 2026, 11, 20, 12), "Last week's session.")

    assert plan(SUNDAY_EVENING) == 0
    assert weekly_episode_write(user_id=user.pk, week_key="week-2026-48", now=SUNDAY_EVENING) is None
    assert model_server.chat_requests() == []


def test_sunday_evening_comes_round_the_world_in_turn(
    user: User, other_user: User, model_server: ModelServer, celery_eager: None, plan: Callable[[datetime], int]
) -> None:
    for person, zone in ((user, HELSINKI), (other_user, "America/New_York")):
        prefer(person, time_zone=zone)
        session_on(person, at(zone, 2026, 11, 27, 12), "A session this week.")

    assert plan(SUNDAY_EVENING) == 1  # 13:30 in New York
    assert list(Memory.objects.filter(category="episode").values_list("user", flat=True)) == [user.pk]
    assert plan(at("America/New_York", 2026, 11, 29, 20, 30)) == 1  # Monday in Helsinki
    assert Memory.objects.get(user=other_user, category="episode").key == "week-2026-48"


def test_sixteen_weeks_of_episodes_leave_the_newest_fourteen(user: User, model_server: ModelServer) -> None:
    prefer(user, time_zone=HELSINKI)
    zone = ZoneInfo(HELSINKI)
    for week in range(1, 17):
        monday = datetime.combine(date.fromisocalendar(2026, week, 1), time(18), tzinfo=zone)
        session_on(user, monday, f"Week {week}: they trained and wrote.")
        weekly_episode_write(user_id=user.pk, week_key=f"week-2026-{week:02d}", now=monday + timedelta(days=6))

    kept = sorted(Memory.objects.filter(user=user, category="episode").values_list("key", flat=True))
    assert kept == [f"week-2026-{week:02d}" for week in range(3, 17)]
    evicted = MemoryEvent.objects.filter(user=user, action="evicted")
    assert sorted(event.key for event in evicted) == ["week-2026-01", "week-2026-02"]


# Due until written ------------------------------------------------------------------------


def episodes_of(user: User) -> list[str]:
    return list(Memory.objects.filter(user=user, category="episode").values_list("key", flat=True))


def test_a_week_whose_write_was_lost_is_asked_for_at_a_later_tick_and_written_once(
    user: User,
    week: list[ChatSession],
    model_server: ModelServer,
    celery_eager: None,
    plan: Callable[[datetime], int],
    django_capture_on_commit_callbacks,
) -> None:
    # The broker is down when the first tick hands out its task: the task is lost.
    with django_capture_on_commit_callbacks(execute=False):
        assert weekly_episodes_plan(now=SUNDAY_EVENING) == 1
    assert episodes_of(user) == []

    assert plan(SUNDAY_EVENING + timedelta(minutes=30)) == 0  # its pause
    assert plan(SUNDAY_EVENING + timedelta(hours=1)) == 1  # Sunday 21:30: asked again, written
    assert [plan(SUNDAY_EVENING + timedelta(hours=hours)) for hours in (2, 24, 24 * 6)] == [0, 0, 0]

    assert episodes_of(user) == ["week-2026-48"]
    assert len(model_server.chat_requests()) == 1


def test_a_write_the_model_fails_is_asked_again_after_a_growing_pause(
    user: User, week: list[ChatSession], model_server: ModelServer, celery_eager: None, plan: Callable[[datetime], int]
) -> None:
    for _ in range(3):
        model_server.queue_error(503)

    ticks = [plan(SUNDAY_EVENING + timedelta(hours=hours)) for hours in range(9)]

    # Asked at once, then at the first hourly tick after 50 minutes, 100, 200: the fourth writes it.
    assert ticks == [1, 1, 0, 1, 0, 0, 0, 1, 0]
    assert episodes_of(user) == ["week-2026-48"]
    asked = WeeklyEpisodeRequest.objects.get(user=user)
    assert asked.attempts == 4 and asked.done_at is not None and asked.error == ""


def test_a_week_is_asked_for_no_longer_than_the_due_days_after_its_sunday_evening(
    user: User,
    week: list[ChatSession],
    model_server: ModelServer,
    plan: Callable[[datetime], int],
    django_capture_on_commit_callbacks,
    settings,
) -> None:
    settings.WEEKLY_EPISODE_DUE_DAYS = 2

    with django_capture_on_commit_callbacks(execute=False):
        # Every task lost: each tick whose pause is over asks again, until the week is too old.
        asked = [weekly_episodes_plan(now=SUNDAY_EVENING + timedelta(hours=hours)) for hours in range(0, 60, 12)]

    assert asked == [1, 1, 1, 1, 0]
    assert episodes_of(user) == []


def test_two_workers_writing_the_same_week_at_once_write_it_once(
    user: User, week: list[ChatSession], model_server: ModelServer, transactional_db: None
) -> None:
    # The model is slow: both workers are past every check before either has an answer.
    model_server.queue_text(EPISODE, delay_seconds=1)
    model_server.queue_text(EPISODE, delay_seconds=1)
    start = threading.Barrier(2)

    def write() -> None:
        start.wait()
        try:
            weekly_episode_write(user_id=user.pk, week_key="week-2026-48", now=SUNDAY_EVENING)
        finally:
            connection.close()

    workers = [threading.Thread(target=write) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)

    assert episodes_of(user) == ["week-2026-48"]
    assert list(MemoryEvent.objects.filter(user=user).values_list("action", flat=True)) == ["created"]
    assert len(model_server.chat_requests()) == 1


def test_an_episode_the_person_deleted_is_not_written_again_while_its_week_is_due(
    user: User, week: list[ChatSession], model_server: ModelServer, celery_eager: None, plan: Callable[[datetime], int]
) -> None:
    assert plan(SUNDAY_EVENING) == 1
    memory_delete(user=user, memory_id=memory_named(user, "week-2026-48").pk, actor="user")

    later = [plan(SUNDAY_EVENING + timedelta(hours=hours)) for hours in (1, 2, 5, 24, 24 * 6)]

    assert later == [0, 0, 0, 0, 0]
    assert episodes_of(user) == []
    assert len(model_server.chat_requests()) == 1
