"""The welcome form: each answer becomes a protected profile memory; skipping is fine."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import User
from emails.models import EmailPreference
from memory.models import Memory
from offline_coach import ModelServer
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def newcomer(client: Client) -> User:
    person = make_user("new@example.com", onboarded=False)
    client.force_login(person)
    return person


ANSWERS = {
    "working-on": "Getting back into lifting after a year off",
    "goals": "Deadlift 100 kg by summer",
    "health": "Bad left shoulder, no overhead pressing",
    "schedule": "Mornings on Monday, Wednesday and Friday",
    "coaching-style": "Blunt, short answers",
}


def test_each_answer_becomes_a_protected_profile_memory(
    client: Client, newcomer: User, model_server: ModelServer
) -> None:
    response = client.post("/welcome/", ANSWERS | {"time_zone": "Europe/Helsinki"})

    assert response.status_code == 302 and response.url == "/"
    # What the person wrote is named by its category and a number, never by the question.
    memories = {m.key: m for m in Memory.objects.filter(user=newcomer)}
    assert set(memories) == {"background-1", "goal-1", "injury-1", "schedule-1", "feedback-1"}
    assert len(memories) == len(ANSWERS)
    assert all(m.source == "onboarding" and m.tier == "profile" and m.is_protected for m in memories.values())
    assert memories["injury-1"].category == "injury"
    assert memories["injury-1"].content == "Bad left shoulder, no overhead pressing"
    assert memories["injury-1"].summary == "Health: Bad left shoulder, no overhead pressing"
    assert len(model_server.embedding_requests()) == 1
    newcomer.refresh_from_db()
    assert newcomer.onboarded_at is not None
    # The detected time zone is the person's own, on their account.
    assert newcomer.time_zone == "Europe/Helsinki"


def test_blank_answers_are_not_remembered(client: Client, newcomer: User) -> None:
    client.post("/welcome/", {"goals": "Run a 10k", "health": "  "})

    assert [(m.key, m.content) for m in Memory.objects.filter(user=newcomer)] == [("goal-1", "Run a 10k")]


def test_an_allergy_is_filed_as_an_allergy(client: Client, newcomer: User) -> None:
    client.post("/welcome/", {"health": "Allergic to peanuts"})

    memory = Memory.objects.get(user=newcomer)
    assert (memory.key, memory.category, memory.content) == ("allergy-1", "allergy", "Allergic to peanuts")


def test_skipping_lets_the_person_straight_into_the_chat(client: Client, newcomer: User) -> None:
    response = client.post("/welcome/", {"skip": "1", "goals": "ignored"})

    assert response.status_code == 302
    assert not Memory.objects.filter(user=newcomer).exists()
    assert client.get("/").status_code == 200


def test_an_unknown_time_zone_is_ignored(client: Client, newcomer: User) -> None:
    before = newcomer.time_zone
    client.post("/welcome/", {"goals": "Run", "time_zone": "Mars/Olympus"})

    newcomer.refresh_from_db()
    assert newcomer.time_zone == before == "UTC"
    assert newcomer.onboarded_at is not None
    assert not EmailPreference.objects.filter(user=newcomer).exists()


def test_when_memory_is_unavailable_the_answers_stay_in_the_form(
    client: Client, newcomer: User, model_server: ModelServer
) -> None:
    model_server.queue_embedding_error(503)

    response = client.post("/welcome/", ANSWERS)

    assert response.status_code == 200
    html = response.content.decode()
    assert "could not be saved just now" in html
    assert "Bad left shoulder, no overhead pressing" in html
    newcomer.refresh_from_db()
    assert newcomer.onboarded_at is None


def test_an_answer_over_the_limit_is_refused_inline(client: Client, newcomer: User, settings) -> None:
    response = client.post("/welcome/", {"goals": "x" * (settings.MEMORY_CONTENT_MAX_CHARS + 1)})

    assert response.status_code == 200
    assert "Ensure this value has at most" in response.content.decode()
    assert not Memory.objects.filter(user=newcomer).exists()


def test_the_welcome_form_refuses_other_methods(client: Client, newcomer: User) -> None:
    assert client.put("/welcome/").status_code == 405
