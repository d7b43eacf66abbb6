"""The reply as a person meets it in Chromium when things are not simple: no JavaScript, a
reload mid-reply, a second tab, a Stop, a memory saved on the way, a refused request."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import Browser, Page, expect

from accounts.models import User
from coach.models import Message
from memory.models import Memory
from offline_coach import ModelServer, Pause
from tests.coach.factories import TALK_SAVE
from tests.coach.test_chat_in_browser import log_in, send

pytestmark = pytest.mark.django_db(transaction=True)

LONG_REPLY = " ".join(f"word{n}" for n in range(60))


def test_without_javascript_the_page_refreshes_until_the_reply_is_there(
    browser: Browser, live_app: str, user: User, model_server: ModelServer
) -> None:
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        log_in(page, live_app, user)
        # Held before its first word until the page has said so, however slow the machine.
        thinking = Pause(after_chunks=0)
        model_server.queue_text("Here is your week.", pause=thinking)
        loads: list[str] = []
        page.on("load", lambda loaded: loads.append(loaded.url))

        page.get_by_label("Message").fill("Plan my week")
        page.get_by_role("button", name="Send").click()

        # Playwright's text queries skip <noscript>; the page's own HTML is what Chromium shows.
        assert "Your coach is answering. This page refreshes by itself" in page.content()
        thinking.release.set()
        expect(page.locator(".from-coach")).to_have_text("Here is your week.", timeout=15_000)
        assert len(loads) >= 2, "the reply came by the page refreshing itself"
        expect(page.locator(".from-person")).to_have_text(["Plan my week"])
    finally:
        context.close()


def test_a_reload_mid_reply_shows_the_words_so_far_at_once_and_the_reply_goes_on(
    page: Page, live_app: str, user: User, model_server: ModelServer
) -> None:
    log_in(page, live_app, user)
    # Held after word6 until the reload: the words so far are all the page can show.
    writing = Pause(after_chunks=8)
    model_server.queue_text(LONG_REPLY, pause=writing)
    send(page, "Plan my week")
    expect(page.locator(".from-coach").last).to_contain_text("word5")

    page.reload()

    expect(page.locator(".from-coach").last).to_contain_text("word5")
    writing.release.set()
    expect(page.locator(".from-coach").last).to_have_text(LONG_REPLY, timeout=20_000)
    assert len(model_server.chat_requests()) == 1


def test_a_second_tab_follows_the_same_reply_and_sees_what_the_first_sends(
    page: Page, live_app: str, user: User, model_server: ModelServer
) -> None:
    log_in(page, live_app, user)
    writing = Pause(after_chunks=8)
    model_server.queue_text(LONG_REPLY, pause=writing)
    send(page, "Plan my week")
    expect(page.locator(".from-coach").last).to_contain_text("word5")

    other = page.context.new_page()
    other.goto(page.url)

    expect(other.locator(".from-coach").last).to_contain_text("word5")
    writing.release.set()
    expect(other.locator(".from-coach").last).to_have_text(LONG_REPLY, timeout=20_000)
    expect(page.locator(".from-coach").last).to_have_text(LONG_REPLY)

    model_server.queue_text("Next week, the same again.")
    send(other, "And next week?")

    for tab in (page, other):
        expect(tab.locator(".from-person")).to_have_text(["Plan my week", "And next week?"])
        expect(tab.locator(".from-coach").last).to_have_text("Next week, the same again.")
    assert Message.objects.filter(role="user").count() == 2


def test_stop_keeps_what_was_written_and_enter_says_why_it_cannot_send_meanwhile(
    page: Page, live_app: str, user: User, model_server: ModelServer
) -> None:
    log_in(page, live_app, user)
    # Held after word3: the reply is still being written when Stop is pressed.
    writing = Pause(after_chunks=5)
    model_server.queue_text(LONG_REPLY, pause=writing)
    send(page, "Plan my week")
    reply = page.locator(".from-coach").last
    expect(reply).to_contain_text("word3")

    page.get_by_label("Message").fill("One more thing")
    page.get_by_label("Message").press("Enter")
    expect(page.locator("#composer-hint")).to_contain_text("Enter can't send yet: your coach is still answering")
    with page.expect_response(lambda response: response.url.endswith("/stop")):
        page.get_by_role("button", name="Stop").click()
    # The Stop is in: the model's next words are where the turn hears it.
    writing.release.set()

    expect(reply).to_contain_text("You stopped this reply.")
    expect(page.locator("#send-button")).to_be_enabled()
    expect(page.get_by_label("Message")).to_have_value("One more thing")
    kept = Message.objects.get(role="assistant")
    assert kept.status == "stopped" and LONG_REPLY.startswith(kept.content) and kept.content != LONG_REPLY
    page.reload()
    expect(page.locator(".from-coach").last).to_contain_text("You stopped this reply.")


def test_a_memory_saved_mid_reply_is_a_quiet_cue_and_undo_takes_it_back(
    page: Page, live_app: str, user: User, model_server: ModelServer
) -> None:
    log_in(page, live_app, user)
    model_server.queue_tool_calls([("save_memory", TALK_SAVE)])
    # Still writing while the new conversation's page loads, as a real model would be: the
    # page follows a reply being written (its cues with it), and shows a finished one whole.
    writing = Pause(after_chunks=1)
    model_server.queue_text("Good luck with the talk.", pause=writing)

    send(page, "I'm giving a talk in June")

    cue = page.get_by_role("status").locator(".memory-cue")
    expect(cue).to_contain_text("Saved to memory: Giving a talk in June")
    memory = Memory.objects.get(user=user)
    expect(cue.get_by_role("link", name="View")).to_have_attribute("href", f"/memories/{memory.pk}/")
    writing.release.set()
    expect(page.locator(".from-coach").last).to_have_text("Good luck with the talk.")

    cue.get_by_role("button", name="Undo").click()

    expect(cue).to_have_text("Not kept: Giving a talk in June")
    deadline = time.monotonic() + 5
    while Memory.objects.filter(user=user).exists():
        assert time.monotonic() < deadline, "Undo did not delete the memory"
        time.sleep(0.05)


def test_the_cue_of_a_memory_saved_in_a_reply_is_still_there_after_a_reload(
    page: Page, live_app: str, user: User, model_server: ModelServer
) -> None:
    log_in(page, live_app, user)
    model_server.queue_tool_calls([("save_memory", TALK_SAVE)])
    model_server.queue_text("Good luck with the talk.")
    send(page, "I'm giving a talk in June")
    expect(page.locator(".from-coach").last).to_have_text("Good luck with the talk.")

    page.reload()

    cue = page.get_by_role("status").locator(".memory-cue")
    # Its Undo too: what the coach saved can be taken back from its cue whenever it shows.
    expect(cue).to_have_text("Saved to memory: Giving a talk in June · View · Undo")
    memory = Memory.objects.get(user=user)
    cue.get_by_role("link", name="View").click()
    expect(page).to_have_url(f"{live_app}/memories/{memory.pk}/")
    expect(page.get_by_text("Giving a talk at the library in June")).to_be_visible()


def test_a_form_body_over_the_limit_is_explained_beside_the_message_box(
    page: Page, live_app: str, user: User, settings
) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2_000
    log_in(page, live_app, user)

    send(page, "€" * 1_000)

    expect(page.locator("#composer-error")).to_contain_text("That is too much to send at once")
    expect(page.get_by_label("Message")).to_have_value("€" * 1_000)
    assert not Message.objects.exists()


def test_a_send_that_fails_says_why_beside_the_box_and_keeps_the_text(page: Page, live_app: str, user: User) -> None:
    log_in(page, live_app, user)
    box = page.get_by_label("Message")

    page.route("**/chat/new", lambda route: route.fulfill(status=502, body="<html>Bad gateway</html>"))
    send(page, "Plan my week")
    expect(page.locator("#composer-error")).to_have_text(
        "The app is restarting or out of reach. Try again in a moment."
    )
    expect(box).to_have_value("Plan my week")

    page.unroute("**/chat/new")
    page.route("**/chat/new", lambda route: route.abort())
    box.press("Enter")
    expect(page.locator("#composer-error")).to_have_text(
        "Couldn't reach the server. Check your connection, then try again."
    )
    expect(box).to_have_value("Plan my week")

    page.unroute("**/chat/new")
    box.press("Enter")
    expect(page.locator(".from-person")).to_have_text(["Plan my week"])
    expect(page.locator("#composer-error")).to_have_text("")
    assert Message.objects.filter(role="user").count() == 1


def test_a_failed_memory_action_is_explained_at_the_top_of_the_page(page: Page, live_app: str, user: User) -> None:
    from tests.memory.factories import make_memory

    make_memory(user, "breakfast", summary="Oats every morning", content="Oats every morning")
    log_in(page, live_app, user)
    page.goto(live_app + "/memories/")
    page.route("**/memories/*/edit", lambda route: route.fulfill(status=500, body="boom"))

    page.get_by_role("link", name="Edit").first.click()

    expect(page.locator("#page-alert")).to_have_text(
        "Something went wrong on our side. Nothing you wrote was lost: try again in a moment."
    )


def test_a_model_slow_to_start_is_shown_as_still_thinking_until_its_words_come(
    page: Page, live_app: str, user: User, model_server: ModelServer, settings
) -> None:
    settings.LLM_TIMEOUT_SECONDS = 20
    log_in(page, live_app, user)
    # Held before its first word until the page says it is still thinking.
    thinking = Pause(after_chunks=0)
    model_server.queue_text("Here is your week.", pause=thinking)

    send(page, "Plan my week")

    expect(page.locator(".from-coach .thinking")).to_have_text("Still thinking…", timeout=15_000)
    thinking.release.set()
    expect(page.locator(".from-coach").last).to_have_text("Here is your week.", timeout=15_000)
    expect(page.locator(".thinking")).to_have_count(0)
