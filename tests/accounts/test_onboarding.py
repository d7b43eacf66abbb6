"""The welcome form: each fact of each answer becomes a protected profile memory, filed
in its own category; the time zone and the email choice are kept; skipping is fine."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import User
from emails.models import EmailPreference
from memory.context import assemble_memory_context
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
    # One fact, one memory: the comma joins the parts of one fact, it does not split it.
    assert memories["injury-1"].summary == "Bad left shoulder, no overhead pressing"
    assert memories["injury-1"].content == "Bad left shoulder, no overhead pressing"
    # A few words first only where the fact alone would not say what it is about.
    assert memories["background-1"].summary == "Working on: Getting back into lifting after a year off"
    assert memories["feedback-1"].summary == "Coaching style: Blunt, short answers"
    assert memories["goal-1"].summary == "Deadlift 100 kg by summer"
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


def test_the_health_answer_becomes_one_memory_per_fact_each_in_its_category(
    client: Client, newcomer: User, model_server: ModelServer
) -> None:
    client.post("/welcome/", {"health": "bad left knee; allergic to peanuts"})

    memories = Memory.objects.filter(user=newcomer).order_by("pk")
    assert [(m.category, m.summary, m.content) for m in memories] == [
        ("injury", "Bad left knee", "Bad left knee"),
        ("allergy", "Allergic to peanuts", "Allergic to peanuts"),
    ]
    assert all(m.source == "onboarding" and m.is_protected for m in memories)
    # Both facts embedded in one call, made before anything was written.
    requests = model_server.embedding_requests()
    assert len(requests) == 1 and len(requests[0]["input"]) == 2


def test_a_label_the_person_typed_is_not_doubled_on_the_memory_page_or_to_the_model(
    client: Client, newcomer: User
) -> None:
    client.post("/welcome/", {"goals": "goal: run a half marathon in April"})

    memory = Memory.objects.get(user=newcomer)
    assert (memory.category, memory.summary) == ("goal", "Run a half marathon in April")
    page = client.get("/memories/").content.decode()
    assert "Run a half marathon in April" in page
    assert not re.search(r"goals?:", page, re.IGNORECASE)
    prompt = assemble_memory_context(user=newcomer, now=timezone.now()).text
    assert "Run a half marathon in April" in prompt and not re.search(r"goals?: ", prompt, re.IGNORECASE)


def test_lines_bullets_and_semicolons_part_facts_and_an_allergy_label_reads_as_words(
    client: Client, newcomer: User
) -> None:
    health = "Allergies: peanuts, cashews\n- asthma, mild\n• Injury: torn ACL in 2019."
    client.post("/welcome/", {"health": health, "goals": "1. Run 10k\n2. Lose 5 kg; sleep by 23:00"})

    memories = Memory.objects.filter(user=newcomer).order_by("pk")
    assert [(m.category, m.summary) for m in memories] == [
        ("goal", "Run 10k"),
        ("goal", "Lose 5 kg"),
        ("goal", "Sleep by 23:00"),
        ("allergy", "Allergic to peanuts, cashews"),
        ("medical", "Asthma, mild"),
        ("injury", "Torn ACL in 2019"),
    ]


def test_a_long_list_in_one_answer_is_refused_inline_and_nothing_is_lost(client: Client, newcomer: User) -> None:
    goals = "\n".join(f"Goal number {n}" for n in range(1, 16))

    response = client.post("/welcome/", {"goals": goals, "time_zone": "Europe/Oslo"})

    html = response.content.decode()
    assert response.status_code == 200
    assert "That is 15 separate things; keep it to 12 here" in html
    assert "Goal number 15" in html
    assert not Memory.objects.filter(user=newcomer).exists()
    newcomer.refresh_from_db()
    # The zone is kept even so: the person may never send the form again.
    assert newcomer.onboarded_at is None and newcomer.time_zone == "Europe/Oslo"


def test_skipping_keeps_the_time_zone_the_browser_gave(client: Client, newcomer: User) -> None:
    client.post("/welcome/", {"skip": "1", "time_zone": "Pacific/Chatham", "goals": "not remembered"})

    newcomer.refresh_from_db()
    assert newcomer.time_zone == "Pacific/Chatham" and newcomer.onboarded_at is not None
    assert not Memory.objects.filter(user=newcomer).exists()
    # Nothing was chosen about emails, so none are sent.
    assert not EmailPreference.objects.filter(user=newcomer).exists()


def test_a_browser_s_old_name_for_a_zone_is_kept_as_the_place_it_stands_for(client: Client, newcomer: User) -> None:
    client.post("/welcome/", {"skip": "1", "time_zone": "Asia/Calcutta"})

    newcomer.refresh_from_db()
    assert newcomer.time_zone == "Asia/Kolkata"


def test_choosing_no_emails_in_onboarding_is_kept(client: Client, newcomer: User) -> None:
    client.post("/welcome/", {"goals": "Run a 10k", "email_frequency": "off", "time_zone": "Europe/Helsinki"})

    assert EmailPreference.objects.get(user=newcomer).frequency == "off"
    html = client.get("/account/").content.decode()
    assert re.search(r'<input type="radio" name="frequency" value="off"[^>]* checked>', html)
    assert "You chose no notes between sessions." in html


def test_an_email_choice_made_before_skipping_is_kept(client: Client, newcomer: User) -> None:
    client.post("/welcome/", {"skip": "1", "email_frequency": "twice_weekly"})

    assert EmailPreference.objects.get(user=newcomer).frequency == "twice_weekly"


def test_an_unknown_email_choice_is_refused_inline(client: Client, newcomer: User) -> None:
    response = client.post("/welcome/", {"goals": "Run", "email_frequency": "hourly"})

    assert "Choose once a week, twice a week or no emails." in response.content.decode()
    assert not EmailPreference.objects.filter(user=newcomer).exists()
    assert not Memory.objects.filter(user=newcomer).exists()


def test_the_welcome_form_asks_about_emails_with_nothing_chosen_for_the_person(client: Client, newcomer: User) -> None:
    html = client.get("/welcome/").content.decode()

    assert "May your coach email you between sessions?" in html
    for value, label in (("weekly", "Once a week"), ("twice_weekly", "Twice a week"), ("off", "No emails")):
        assert re.search(rf'value="{value}"[^>]*>\s*{label}', html)
    assert 'name="email_frequency"' in html and "checked" not in html


def test_every_question_s_help_is_tied_to_its_field(client: Client, newcomer: User) -> None:
    html = client.get("/welcome/").content.decode()

    fields = re.findall(r'<(?:textarea|select|fieldset)[^>]*\baria-describedby="([^"]+)"', html)
    assert len(fields) == 7
    for described_by in fields:
        assert re.search(rf'id="{described_by}">[^<]+', html), described_by


def test_an_unknown_time_zone_is_ignored(client: Client, newcomer: User) -> None:
    before = newcomer.time_zone
    client.post("/welcome/", {"goals": "Run", "time_zone": "Mars/Olympus"})

    newcomer.refresh_from_db()
    assert newcomer.time_zone == before == "UTC"
    assert newcomer.onboarded_at is not None
    assert not EmailPreference.objects.filter(user=newcomer).exists()


def test_when_memory_is_unavailable_the_answers_stay_in_the_form_and_the_settings_are_kept(
    client: Client, newcomer: User, model_server: ModelServer
) -> None:
    model_server.queue_embedding_error(503)

    response = client.post("/welcome/", ANSWERS | {"time_zone": "Europe/Helsinki", "email_frequency": "weekly"})

    assert response.status_code == 200
    html = response.content.decode()
    assert "could not be saved just now" in html
    assert "Bad left shoulder, no overhead pressing" in html
    newcomer.refresh_from_db()
    assert newcomer.onboarded_at is None
    assert not Memory.objects.filter(user=newcomer).exists()
    assert newcomer.time_zone == "Europe/Helsinki"
    assert EmailPreference.objects.get(user=newcomer).frequency == "weekly"


def test_an_answer_over_the_limit_is_refused_inline(client: Client, newcomer: User, settings) -> None:
    response = client.post("/welcome/", {"goals": "x" * (settings.MEMORY_CONTENT_MAX_CHARS + 1)})

    assert response.status_code == 200
    assert "Ensure this value has at most" in response.content.decode()
    assert not Memory.objects.filter(user=newcomer).exists()


def test_the_welcome_form_refuses_other_methods(client: Client, newcomer: User) -> None:
    assert client.put("/welcome/").status_code == 405
