"""Help for someone in danger is one click from every page, signed in or not, and the
coach's instructions send people there instead of coaching them."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import User
from coach.conversation import system_prompt

pytestmark = pytest.mark.django_db


def test_the_help_page_says_where_to_turn_in_a_crisis_without_signing_in(client: Client) -> None:
    html = client.get("/help/").content.decode()

    assert "If you or someone else is in danger" in html
    for number in ("112", "911", "999", "988", "116 123"):
        assert f"<strong>{number}</strong>" in html
    assert 'href="https://findahelpline.com/"' in html


def test_every_page_links_to_help(client: Client, user: User) -> None:
    assert 'href="/help/"' in client.get("/accounts/login/").content.decode()
    client.force_login(user)
    assert 'href="/help/"' in client.get("/memories/").content.decode()


def test_the_help_page_refuses_a_post(client: Client) -> None:
    assert client.post("/help/").status_code == 405


def test_the_coach_is_told_to_stop_coaching_someone_in_danger_and_point_to_help(user: User) -> None:
    for remembers in (True, False):
        prompt, _ = system_prompt(user=user, now=timezone.now(), remembers=remembers)
        section = prompt.split("## If someone may be in danger", 1)[1].split("\n## ", 1)[0]
        assert "stop coaching" in section and "emergency number" in section and "help page" in section
        assert "Save nothing\nof it unless they ask" in section
