"""Ending a session, in Chromium: the person stays on the conversation, is told it ended,
finds no message box in it, and sees its summary once the coach has written it."""

from __future__ import annotations

import pytest
from django.test import Client
from playwright.sync_api import Page, expect

from accounts.models import User
from coach.services import session_summary_save
from tests.coach.factories import make_session
from tests.conftest import make_user

pytestmark = pytest.mark.django_db(transaction=True)

SUMMARY = "You ran 5 km and felt strong; next, a longer run on Sunday."


@pytest.fixture
def person(page: Page, live_app: str) -> User:
    user = make_user("ada@example.com")
    client = Client()
    client.force_login(user)
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_app}])
    return user


def test_ending_a_session_says_so_and_shows_its_summary_when_written(page: Page, live_app: str, person: User) -> None:
    session = make_session(person, "I ran 5 km today", "Great work.")
    make_session(person, "An older conversation", "Yes.")
    page.goto(f"{live_app}/chat/{session.pk}/")
    page.wait_for_load_state("load")

    page.get_by_role("button", name="End session").click()

    ended = page.locator("#session-ended")
    expect(ended).to_contain_text("This conversation has ended.")
    assert page.url == f"{live_app}/chat/{session.pk}/"
    expect(page.get_by_label("Message")).to_have_count(0)
    expect(ended.get_by_role("link", name="Start a new conversation")).to_be_visible()
    expect(ended).to_contain_text("Your coach is writing a short summary")

    session_summary_save(session=session, summary=SUMMARY)

    expect(ended).to_contain_text(SUMMARY, timeout=10_000)
    page.goto(live_app + "/memories/")
    expect(page.locator("#conversation-summaries")).to_contain_text(SUMMARY)
