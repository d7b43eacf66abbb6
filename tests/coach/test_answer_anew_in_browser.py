"""Regenerate and Edit as a person meets them in Chromium over real ASGI: the new answer
streams in place, the earlier one is a page back, what the first answer saved stays with
its Undo, and the model is asked with the same request up to the message. Without
JavaScript, both work as plain forms; a second tab follows the new answer."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import Browser, Page, expect

from accounts.models import User
from coach.models import ChatSession, Message
from memory.models import Memory
from offline_coach import ModelServer, Pause
from tests.coach.factories import TALK_SAVE
from tests.coach.test_chat_in_browser import log_in, send
from tests.coach.test_turn import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

KNEE_SAVE = {
    "key": "knee",
    "tier": "profile",
    "category": "injury",
    "summary": "Left knee hurts after runs",
    "content": "Left knee hurts after runs",
    "due_at": None,
    "keep_separate": None,
}


def wire(messages: list[dict]) -> str:
    return json.dumps(messages, ensure_ascii=False)


def first_request_of_the_last_turn(model_server: ModelServer, before: int) -> dict:
    wait_for(lambda: len(model_server.chat_requests()) > before)
    return model_server.chat_requests()[before]


def answered_with_a_save(page: Page, model_server: ModelServer, said: str, save: dict, answer: str) -> list[dict]:
    """The person says `said`; the coach saves `save` and answers `answer`, with the cue of
    the save under it. The messages of the turn's first request."""
    model_server.queue_tool_calls([("save_memory", save)])
    model_server.queue_text(answer)
    before = len(model_server.chat_requests())
    send(page, said)
    expect(page.locator(".from-coach").last).to_have_text(answer)
    expect(page.locator(".memory-cue")).to_contain_text(f"Saved to memory: {save['summary']}")
    return model_server.chat_requests()[before]["messages"]


def test_regenerate_streams_a_new_answer_keeps_the_first_a_page_back_and_its_memory_with_undo(
    page: Page, live_app: str, user: User, model_server: ModelServer
) -> None:
    log_in(page, live_app, user)
    first = answered_with_a_save(
        page, model_server, "I'm giving a talk in June", TALK_SAVE, "Good luck with the qzkumquat talk."
    )
    reply, cue = page.locator(".from-coach").last, page.locator(".memory-cue")

    # Held after its first words, so Regenerate is seen hidden while the answer is written.
    writing = Pause(after_chunks=4)
    model_server.queue_text("Break a leg in June: start with the outline.", pause=writing)
    before = len(model_server.chat_requests())
    page.get_by_role("button", name="Regenerate").click()

    expect(reply).to_contain_text("Break a leg")
    expect(page.get_by_role("button", name="Regenerate")).to_be_hidden()  # while it is written
    writing.release.set()
    expect(reply).to_have_text("Break a leg in June: start with the outline.")
    pager = page.get_by_role("navigation", name="Answers to this message")
    expect(pager).to_contain_text("2 / 2")
    expect(cue).to_have_text("Saved to memory: Giving a talk in June · View · Undo")
    # The model was asked with the first request, byte for byte, then the memory's note.
    again = first_request_of_the_last_turn(model_server, before)["messages"]
    assert wire(again[: len(first)]) == wire(first)
    assert [m["role"] for m in again[len(first) :]] == ["assistant", "tool"]
    assert "qzkumquat" not in wire(again)

    pager.get_by_role("link", name="Earlier answer").click()
    expect(reply).to_contain_text("Good luck with the qzkumquat talk.")
    expect(reply).to_contain_text("An earlier answer: your coach goes on from the latest one.")
    expect(pager).to_contain_text("1 / 2")
    expect(pager.get_by_role("link", name="Latest answer")).to_be_focused()
    pager.get_by_role("link", name="Latest answer").click()
    expect(reply).to_have_text("Break a leg in June: start with the outline.")

    cue.get_by_role("button", name="Undo").click()
    expect(cue).to_have_text("Not kept: Giving a talk in June")
    wait_for(lambda: not Memory.objects.filter(user=user).exists(), timeout=5)


def test_edit_replaces_the_words_in_place_and_the_new_answer_keeps_what_the_first_saved(
    page: Page, live_app: str, user: User, model_server: ModelServer
) -> None:
    log_in(page, live_app, user)
    first = answered_with_a_save(
        page, model_server, "My left knee hurts after runs", KNEE_SAVE, "Let's rest the qzkumquat knee this week."
    )

    page.get_by_text("Edit", exact=True).click()
    box = page.get_by_label("Edit what you wrote")
    expect(box).to_be_focused()
    expect(box).to_have_value("My left knee hurts after runs")
    expect(page.locator(".from-person")).to_be_hidden()
    model_server.queue_text("Then we rest the right knee, and keep the left in mind.")
    before = len(model_server.chat_requests())
    box.fill("My right knee hurts after runs, not the left")
    box.press("Enter")

    expect(page.locator(".from-person")).to_have_text(["My right knee hurts after runs, not the left"])
    expect(page.locator(".from-coach")).to_have_text(["Then we rest the right knee, and keep the left in mind."])
    expect(page.get_by_role("navigation", name="Answers to this message")).to_have_count(0)
    expect(page.locator(".memory-cue")).to_have_text("Saved to memory: Left knee hurts after runs · View · Undo")
    expect(page.get_by_label("Message")).to_be_focused()
    again = first_request_of_the_last_turn(model_server, before)["messages"]
    up_to = len(first) - 1
    assert wire(again[:up_to]) == wire(first[:up_to]), "byte for byte up to the message"
    assert again[up_to] == {"role": "user", "content": "My right knee hurts after runs, not the left"}
    assert [m["role"] for m in again[up_to + 1 :]] == ["assistant", "tool"]
    assert "qzkumquat" not in wire(again)

    page.reload()
    expect(page.locator(".from-person")).to_have_text(["My right knee hurts after runs, not the left"])
    expect(page.get_by_role("heading", level=1)).to_have_text("My right knee hurts after runs, not the left")
    assert list(Message.objects.filter(role="assistant").values_list("content", flat=True)) == [
        "Then we rest the right knee, and keep the left in mind."
    ]


def test_an_edit_refused_says_why_beside_the_box_and_keeps_the_words(
    page: Page, live_app: str, user: User, model_server: ModelServer, settings
) -> None:
    log_in(page, live_app, user)
    model_server.queue_text("Three easy runs.")
    send(page, "Plan my week")
    expect(page.locator(".from-coach").last).to_have_text("Three easy runs.")
    settings.COACH_MESSAGES_PER_MINUTE = 0

    page.get_by_text("Edit", exact=True).click()
    # Typed once the box is ready, as a person sees it: opening it puts the caret at the end,
    # which on a busy machine could land between a fill's select-all and its words.
    box = page.get_by_label("Edit what you wrote")
    expect(box).to_be_focused()
    box.fill("Plan my month")
    page.get_by_role("button", name="Send edit").click()

    expect(page.locator(".message-edit-form .answer-error")).to_have_text(
        "That is a lot to ask of your coach in a minute. Wait a moment, then try again."
    )
    expect(page.get_by_label("Edit what you wrote")).to_have_value("Plan my month")
    assert Message.objects.get(role="user").content == "Plan my week"


def test_once_another_message_is_sent_the_earlier_exchange_offers_no_regenerate(
    page: Page, live_app: str, user: User, model_server: ModelServer
) -> None:
    log_in(page, live_app, user)
    model_server.queue_text("Three easy runs.")
    send(page, "Plan my week")
    expect(page.get_by_role("button", name="Regenerate")).to_be_visible()
    model_server.queue_text("Four runs.")

    send(page, "And next week?")

    expect(page.locator(".from-coach").last).to_have_text("Four runs.")
    expect(page.locator(".regenerate-form")).to_have_count(2)
    expect(page.locator(".exchange").first.locator(".regenerate-form")).to_be_hidden()
    expect(page.locator(".exchange").first.locator(".message-edit")).to_be_hidden()
    expect(page.locator(".exchange").last.get_by_role("button", name="Regenerate")).to_be_visible()


def test_without_javascript_regenerate_and_edit_are_plain_forms_that_work(
    browser: Browser, live_app: str, user: User, model_server: ModelServer
) -> None:
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        log_in(page, live_app, user)
        model_server.queue_text("Three easy runs.")
        page.get_by_label("Message").fill("Plan my week")
        page.get_by_role("button", name="Send").click()
        expect(page.locator(".from-coach")).to_have_text("Three easy runs.", timeout=15_000)

        model_server.queue_text("Two runs and a swim.")
        page.get_by_role("button", name="Regenerate").click()
        expect(page.locator(".from-coach")).to_have_text("Two runs and a swim.", timeout=15_000)
        page.get_by_role("link", name="Earlier answer").click()
        expect(page.locator(".from-coach")).to_contain_text("Three easy runs.")

        model_server.queue_text("A month of easy runs.")
        page.get_by_text("Edit", exact=True).click()
        page.get_by_label("Edit what you wrote").fill("Plan my month")
        page.get_by_role("button", name="Send edit").click()
        expect(page.locator(".from-coach")).to_have_text("A month of easy runs.", timeout=15_000)
        expect(page.locator(".from-person")).to_have_text(["Plan my month"])
        assert ChatSession.objects.get(user=user).title == "Plan my month"
    finally:
        context.close()


def test_a_second_tab_follows_the_answer_the_first_asked_for_anew(
    page: Page, live_app: str, user: User, model_server: ModelServer
) -> None:
    log_in(page, live_app, user)
    model_server.queue_text("Three easy runs.")
    send(page, "Plan my week")
    expect(page.locator(".from-coach").last).to_have_text("Three easy runs.")
    other = page.context.new_page()
    other.goto(page.url)
    expect(other.locator(".from-coach").last).to_have_text("Three easy runs.")
    other.wait_for_load_state("networkidle")

    model_server.queue_text("Two runs and a swim.", chunk_delay_seconds=0.05)
    page.get_by_role("button", name="Regenerate").click()

    for tab in (page, other):
        expect(tab.locator(".from-coach").last).to_have_text("Two runs and a swim.", timeout=10_000)
        expect(tab.get_by_role("navigation", name="Answers to this message")).to_contain_text("2 / 2")
    assert len(model_server.chat_requests()) == 2
    other.close()
