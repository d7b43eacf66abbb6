"""Memory controls in Chromium: a temporary conversation, started with and without
JavaScript, kept by a reload and deleted once left; and memory turned off on the account
page."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from playwright.sync_api import Browser, Page, expect

from accounts.models import User
from coach.models import ChatSession
from coach.temporary import LEAVE_GRACE_SECONDS, pages_open, temporary_conversations_sweep
from memory.models import Memory
from offline_coach import ModelServer
from tests.accessibility import assert_accessible
from tests.coach.factories import make_session
from tests.conftest import make_user
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db(transaction=True)

NOTICE = "Temporary conversation: deleted when you leave it."
DONT_REMEMBER = "Don\u2019t remember this conversation"


def until(page: Page, condition: Callable[[], bool], seconds: float = 10) -> None:
    """Wait for what the app does on its own, a moment after the page asked it."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "it never happened"
        page.wait_for_timeout(100)


def signed_in(page: Page, live_app: str, user: User) -> None:
    client = Client()
    client.force_login(user)
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_app}])


def test_a_temporary_conversation_says_so_at_the_top_is_listed_nowhere_survives_a_reload_and_goes_once_left(
    page: Page, live_app: str, model_server: ModelServer
) -> None:
    person = make_user("ada@example.com")
    make_memory(person, "breakfast", summary="Oats every morning")
    kept = make_session(person, "Plan my week", "Sure.")
    signed_in(page, live_app, person)
    model_server.queue_text("Let's think it through together.")
    page.set_viewport_size({"width": 390, "height": 844})

    page.goto(live_app + "/chat/new")
    page.get_by_label(DONT_REMEMBER).check()
    page.get_by_label("Message").fill("Something I'd rather keep to this chat")
    page.get_by_label("Message").press("Enter")

    expect(page).to_have_url(re.compile(r"/chat/\d+/$"))
    notice = page.locator("#memory-notice")
    expect(notice).to_contain_text(NOTICE)
    expect(page.locator(".from-coach").last).to_have_text("Let's think it through together.")
    expect(notice).to_be_in_viewport()
    expect(page).to_have_title("Temporary conversation · Coach")
    expect(page.locator(".session-list li a")).to_have_text([kept.display_title])
    session = ChatSession.objects.get(user=person, temporary=True)
    assert session.remembered is False
    assert "Oats every morning" not in ModelServer.system_prompt(model_server.chat_requests()[-1])
    assert_accessible(page, "a temporary conversation, on a phone")

    # A reload is no leaving: the page that was left says so, the new one is open.
    page.reload()
    expect(page.locator(".from-coach").last).to_have_text("Let's think it through together.")
    # Its stream is open (the page's script opens it on load), so the page counts as open.
    until(page, lambda: pages_open(session.pk) == 1)
    assert temporary_conversations_sweep(now=timezone.now() + timedelta(seconds=LEAVE_GRACE_SECONDS)) == 0
    assert ChatSession.objects.filter(pk=session.pk).exists()

    page.goto(live_app + "/memories/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Your memories")
    until(page, lambda: ChatSession.objects.get(pk=session.pk).left_at is not None)
    assert temporary_conversations_sweep(now=timezone.now() + timedelta(seconds=LEAVE_GRACE_SECONDS)) == 1
    assert not ChatSession.objects.filter(pk=session.pk).exists()
    assert page.goto(f"{live_app}/chat/{session.pk}/").status == 404


def test_without_javascript_a_temporary_conversation_starts_with_the_notice_too(
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
    session = ChatSession.objects.get(user=person)
    assert (session.remembered, session.temporary) == (False, True)
    context.close()


def test_the_account_page_turns_memory_off_and_the_memory_page_says_so(page: Page, live_app: str) -> None:
    person = make_user("ada@example.com")
    memory = make_memory(person, "breakfast", summary="Oats every morning")
    signed_in(page, live_app, person)

    page.goto(live_app + "/account/")
    section = page.locator("#memory-setting")
    expect(section.get_by_label("On: your coach remembers you")).to_be_checked()
    expect(page.locator("#memory-state")).to_have_text("Memory is on.")
    # On one line: its "on" had been a block of its own ("Memory is / on / .").
    line, state = page.locator("#memory-state").evaluate(
        "e => [e.getBoundingClientRect().height, e.firstElementChild.getBoundingClientRect().height]"
    )
    assert line < 1.5 * state, (line, state)
    section.get_by_label("Off: your coach neither reads your memories nor adds to them").check()
    section.get_by_role("button", name="Save memory setting").click()

    expect(page.locator("#memory-setting").get_by_role("status")).to_have_text("Memory is off.")
    # Said once: the saved message is the state.
    assert page.locator("#memory-setting").inner_text().count("Memory is off") == 1
    assert User.objects.get(pk=person.pk).memory_enabled is False

    page.goto(live_app + "/memories/")
    expect(page.locator("#memory-off-notice")).to_contain_text("Memory is off.")
    expect(page.locator(f"#memory-{memory.pk}")).to_contain_text("Oats every morning")
    assert list(Memory.objects.filter(user=person).values_list("pk", flat=True)) == [memory.pk]
