"""The message box is where the person types: focused when the chat opens, and again after
each message is sent (the first one moves to its new conversation's page)."""

from __future__ import annotations

import pytest
from django.test import Client
from playwright.sync_api import Page, expect

from offline_coach import ModelServer, Pause
from tests.coach.factories import make_session
from tests.coach.test_chat_in_browser import send
from tests.conftest import make_user

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_message_box_is_focused_on_load_and_after_each_message(
    page: Page, live_app: str, model_server: ModelServer
) -> None:
    person = make_user("ada@example.com")
    for number in range(4):
        session = make_session(person, f"Conversation {number}", "Yes.")
        session.ended_at = session.last_message_at
        session.save(update_fields=["ended_at"])
    client = Client()
    client.force_login(person)
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_app}])

    page.goto(live_app + "/chat/new")
    expect(page.get_by_label("Message")).to_be_focused()

    model_server.queue_text("Hello there.")
    send(page, "Hello")
    expect(page.locator(".from-coach").last).to_have_text("Hello there.")
    expect(page.get_by_label("Message")).to_be_focused()

    model_server.queue_text("Good.")
    page.get_by_label("Message").press_sequentially("And again")
    page.keyboard.press("Enter")
    expect(page.locator(".from-coach").last).to_have_text("Good.")
    expect(page.get_by_label("Message")).to_be_focused()


def test_stop_looks_like_the_button_it_is(page: Page, live_app: str, model_server: ModelServer) -> None:
    person = make_user("ada@example.com")
    client = Client()
    client.force_login(person)
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_app}])
    page.goto(live_app + "/chat/new")

    # Held after its first words: Stop is there to look at for as long as the test looks.
    model_server.queue_text("A long answer. " * 20, pause=Pause(after_chunks=2))
    send(page, "Hello")
    stop = page.get_by_role("button", name="Stop")
    expect(stop).to_be_visible()

    border = stop.evaluate("button => getComputedStyle(button).borderTopWidth")
    assert border != "0px"
    stop.click()
