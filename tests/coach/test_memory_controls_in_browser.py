"""Memory controls in Chromium: a conversation that is not remembered, started with and
without JavaScript, and memory turned off on the account page."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from playwright.sync_api import Browser, Page, expect

from accounts.models import User
from coach.models import ChatSession
from memory.models import Memory
from offline_coach import ModelServer
from tests.conftest import make_user
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db(transaction=True)

NOTICE = "This conversation is not remembered."
DONT_REMEMBER = "Don\u2019t remember this conversation"


def signed_in(page: Page, live_app: str, user: User) -> None:
    client = Client()
    client.force_login(user)
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_app}])


def test_starting_a_conversation_not_remembered_shows_the_notice_and_the_sidebar_marks_it(
    page: Page, live_app: str, model_server: ModelServer
) -> None:
    person = make_user("ada@example.com")
    make_memory(person, "breakfast", summary="Oats every morning")
    signed_in(page, live_app, person)
    model_server.queue_text("Let's think it through together.")

    page.goto(live_app + "/chat/new")
    page.get_by_label(DONT_REMEMBER).check()
    page.get_by_label("Message").fill("Something I'd rather keep to this chat")
    page.get_by_label("Message").press("Enter")

    expect(page).to_have_url(re.compile(r"/chat/\d+/$"))
    expect(page.locator("#memory-notice")).to_contain_text(NOTICE)
    expect(page.locator(".from-coach").last).to_have_text("Let's think it through together.")
    current = page.locator(".session-list li").filter(has=page.locator('[aria-current="page"]'))
    expect(current.locator(".session-tag")).to_have_text("Not remembered")
    session = ChatSession.objects.get(user=person)
    assert session.remembered is False
    assert "Oats every morning" not in ModelServer.system_prompt(model_server.chat_requests()[-1])


def test_without_javascript_a_conversation_not_remembered_starts_with_the_notice_too(
    browser: Browser, live_app: str, model_server: ModelServer
) -> None:
    person = make_user("ada@example.com")
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    signed_in(page, live_app, person)
    model_server.queue_text("I'm listening.")

    page.goto(live_app + "/chat/new?not_remembered=1")
    expect(page.get_by_label(DONT_REMEMBER)).to_be_checked()
    page.get_by_label("Message").fill("Just between us")
    page.get_by_role("button", name="Send").click()

    expect(page).to_have_url(re.compile(r"/chat/\d+/$"))
    expect(page.locator("#memory-notice")).to_contain_text(NOTICE)
    # Without JavaScript the page refreshes itself until the reply is in.
    expect(page.locator(".from-coach").last).to_have_text("I'm listening.", timeout=15_000)
    assert ChatSession.objects.get(user=person).remembered is False
    context.close()


def test_the_account_page_turns_memory_off_and_the_memory_page_says_so(page: Page, live_app: str) -> None:
    person = make_user("ada@example.com")
    memory = make_memory(person, "breakfast", summary="Oats every morning")
    signed_in(page, live_app, person)

    page.goto(live_app + "/account/")
    section = page.locator("#memory-setting")
    expect(section.get_by_label("On: your coach remembers you")).to_be_checked()
    section.get_by_label("Off: your coach neither reads your memories nor adds to them").check()
    section.get_by_role("button", name="Save memory setting").click()

    expect(page.locator("#memory-setting").get_by_role("status")).to_have_text("Memory is off.")
    expect(page.locator("#memory-state")).to_have_text("Memory is off.")
    assert User.objects.get(pk=person.pk).memory_enabled is False

    page.goto(live_app + "/memories/")
    expect(page.locator("#memory-off-notice")).to_contain_text("Memory is off.")
    expect(page.locator(f"#memory-{memory.pk}")).to_contain_text("Oats every morning")
    assert list(Memory.objects.filter(user=person).values_list("pk", flat=True)) == [memory.pk]
