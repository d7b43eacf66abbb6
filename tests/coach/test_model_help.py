"""The chat says, once and quietly, when the built-in demo coach answers, and links to the
README's section on using a real model, which the app serves as a page."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from accounts.models import User
from coach.views.model_help import readme_section
from tests.coach.factories import make_session

pytestmark = pytest.mark.django_db
NOTICE = "A built-in demo coach is answering, because no model is configured."


@pytest.fixture
def demo(settings) -> None:
    """As the settings choose the offline coach: no key, and its own address."""
    settings.OPENAI_API_KEY = ""
    settings.OPENAI_BASE_URL = settings.OFFLINE_COACH_URL


@pytest.fixture
def person(client: Client, user: User) -> Client:
    client.force_login(user)
    return client


def notice_links(html: str) -> list[str]:
    return re.findall(r'<p class="model-notice"[^>]*>[^<]*<a href="([^"]+)">Using a real model</a></p>', html)


def test_with_the_demo_coach_the_chat_says_so_once_with_a_link_to_using_a_real_model(
    demo: None, person: Client, user: User
) -> None:
    session = make_session(user, "Hello", "Hi there.", "Plan my week", "Here's a week.")

    page = person.get(f"/chat/{session.pk}/").content.decode()

    assert page.count(NOTICE) == 1
    assert notice_links(page) == ["/help/model"]
    # Said beside the conversation, never inside a reply.
    assert NOTICE not in "".join(re.findall(r'<div class="bubble from-coach">.*?</div>', page, re.DOTALL))


def test_a_fresh_chat_page_says_so_too(demo: None, person: Client) -> None:
    assert person.get("/chat/new").content.decode().count(NOTICE) == 1


def test_with_a_key_there_is_no_notice(person: Client, settings) -> None:
    settings.OPENAI_API_KEY = "sk-a-real-key"

    assert NOTICE not in person.get("/chat/new").content.decode()


def test_a_server_of_their_own_without_a_key_is_no_demo(person: Client, settings) -> None:
    settings.OPENAI_API_KEY = ""
    settings.OPENAI_BASE_URL = "http://localhost:11434/v1"

    assert NOTICE not in person.get("/chat/new").content.decode()


def test_the_link_is_the_readmes_section_with_the_settings_and_the_check(demo: None, client: Client) -> None:
    response = client.get("/help/model")

    assert response.status_code == 200
    page = response.content.decode()
    for needed in ("<code>OPENAI_API_KEY</code>", "<code>OPENAI_BASE_URL</code>", "<code>COACH_MODEL</code>"):
        assert needed in page
    assert "<code>bin/manage check_model</code>" in page
    assert "Right now the built-in demo coach answers" in page


def test_the_help_page_takes_only_get(client: Client) -> None:
    assert client.post("/help/model").status_code == 405


def test_a_section_runs_to_the_next_heading_of_its_level() -> None:
    text = "# T\n## One\nfirst\n### Deeper\nstill one\n## Two\nsecond"

    assert readme_section(text, "## One") == "first\n### Deeper\nstill one"
    assert readme_section(text, "## Three") is None
