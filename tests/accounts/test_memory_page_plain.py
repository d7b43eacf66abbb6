"""The memory page in plain words: tiers named for what they hold, and a memory the person
adds without choosing a category filed by its words, safety topics first."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import User
from memory.models import Memory
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def add(client: Client, summary: str, **fields: str) -> str:
    data = {"summary": summary, "content": "", "tier": "profile", **fields}
    return client.post("/memories/add", data, headers=HTMX).content.decode()


def test_a_memory_added_without_a_category_is_filed_by_its_words_safety_first(client: Client, user: User) -> None:
    client.force_login(user)

    html = add(client, "Allergic to peanuts")

    memory = Memory.objects.get(user=user)
    assert memory.category == "allergy" and memory.is_protected
    assert "Filed under Allergy" in html


def test_the_add_form_lets_the_words_choose_unless_the_person_does(client: Client, user: User) -> None:
    client.force_login(user)

    page = client.get("/memories/").content.decode()
    add(client, "Runs on Sundays", category="goal")

    form = page[page.index('id="add-form"') :]
    assert '<option value="" selected>From what you wrote</option>' in form
    assert Memory.objects.get(user=user).category == "goal"


def test_nothing_in_the_words_files_it_under_other(client: Client, user: User) -> None:
    client.force_login(user)

    add(client, "Blue is nice")

    assert Memory.objects.get(user=user).category == "other"


def test_the_tiers_are_named_in_plain_words(client: Client, user: User) -> None:
    client.force_login(user)

    html = client.get("/memories/").content.decode()

    for label in ("About you", "From your conversations", "Coming up"):
        assert label in html
    assert ">Episodic" not in html and ">Prospective" not in html


def test_a_person_whose_own_memories_fill_the_store_is_told_the_coach_can_note_nothing_new(
    client: Client, user: User, settings
) -> None:
    settings.MEMORY_MAX_STORED = 3
    client.force_login(user)
    for number in range(2):
        make_memory(user, f"mine-{number}", source="user", summary=f"Mine {number}")

    room = client.get("/memories/").content.decode()
    make_memory(user, "mine-2", source="user", summary="Mine 2")
    full = client.get("/memories/").content.decode()

    assert 'id="ceiling-notice"' not in room
    assert "Your coach can note nothing new." in full
