"""Weekly episodes: on a person's Sunday evening, the model summarises their week's
sessions into a `category=episode` memory; the eviction policy keeps the newest 14."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from accounts.models import User
from coach.models import ChatSession
from emails.models import WeeklyEpisodeRequest
from emails.planning import weekly_episode_write, weekly_episodes_plan
from memory.models import Memory, MemoryEvent
from offline_coach import ModelServer
from tests.emails.factories import at, prefer
from tests.memory.factories import memory_named

pytestmark = pytest.mark.django_db

HELSINKI = "Europe/Helsinki"
SUNDAY_EVENING = at(HELSINKI, 2026, 11, 29, 20, 30)


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
