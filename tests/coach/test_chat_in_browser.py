"""The chat as a person meets it, in Chromium over real ASGI."""

from __future__ import annotations

import re

import pytest
from django.core import mail
from playwright.sync_api import Page, expect

from accounts.models import User
from coach.models import Message
from emails.outbox import mail_send_due
from offline_coach import ModelServer, Pause
from tests.conftest import PASSWORD
from tests.providers.replay import stream_events

pytestmark = pytest.mark.django_db(transaction=True)


def log_in(page: Page, live_app: str, user: User) -> None:
    page.goto(live_app + "/accounts/login/")
    page.get_by_label("Email:").fill(user.email)
    page.get_by_label("Password:").fill(PASSWORD)
    page.get_by_role("button", name="Sign In").click()
    expect(page.get_by_role("heading", name="Your coach")).to_be_visible()


def send(page: Page, text: str) -> None:
    # The page's scripts are deferred and wire the form up when the document is ready: until
    # then a message would be sent as a plain form (a whole page load), which is not what
    # these tests are about. "load" comes after every one of them has run (DOMContentLoaded
    # alone was seen to let a fast Enter through first). Waited for here, so every way into
    # the chat page (signing in, onboarding, a new conversation) has it.
    page.wait_for_load_state("load")
    page.get_by_label("Message").fill(text)
    page.get_by_label("Message").press("Enter")


def test_a_new_person_is_remembered_from_onboarding_to_a_new_session(
    page: Page, live_app: str, model_server: ModelServer
) -> None:
    page.goto(live_app + "/accounts/signup/")
    page.get_by_label("Email:").fill("new@example.com")
    page.get_by_label("Password:", exact=True).fill(PASSWORD)
    page.get_by_label("Password (again):").fill(PASSWORD)
    page.get_by_role("button", name="Sign Up").click()
    mail_send_due()
    link = re.search(r"https?://[^/\s]+(/accounts/confirm-email/\S+/)", mail.outbox[-1].body).group(1)
    page.goto(live_app + link)
    page.get_by_role("button", name="Confirm").click()

    page.get_by_label("Injuries, medical conditions or allergies").fill("bad left shoulder")
    page.get_by_role("button", name="Start coaching").click()
    expect(page.get_by_role("heading", name="Your coach")).to_be_visible()

    # Held after its first words, so Send is seen disabled while the reply is written.
    writing = Pause(after_chunks=4)
    model_server.queue_text("Good to meet you. Let's build a plan around your left shoulder.", pause=writing)
    send(page, "Can you plan my first week?")
    reply = page.locator(".from-coach").last
    expect(reply).to_contain_text("Good to meet")
    expect(page.locator("#send-button")).to_be_disabled()
    writing.release.set()
    expect(reply).to_have_text("Good to meet you. Let's build a plan around your left shoulder.")
    expect(page.locator("#send-button")).to_be_enabled()

    page.reload()
    expect(page.locator(".from-person")).to_have_text(["Can you plan my first week?"])
    expect(page.locator(".from-coach")).to_have_text(
        ["Good to meet you. Let's build a plan around your left shoulder."]
    )

    page.get_by_role("link", name="New conversation").click()
    send(page, "Hello again")
    expect(page.locator(".from-coach").last).not_to_have_class(re.compile("streaming"))
    prompt = ModelServer.system_prompt(model_server.chat_requests()[-1])
    # Onboarding keeps what the person wrote, with its first letter as a sentence's.
    assert "): Bad left shoulder\n" in prompt
    assert len(model_server.chat_requests()[-1]["messages"]) == 2, "a new session starts without the old history"


def test_enter_sends_and_shift_enter_starts_a_new_line(page: Page, live_app: str, user: User) -> None:
    log_in(page, live_app, user)
    box = page.get_by_label("Message")

    box.fill("First line")
    box.press("Shift+Enter")
    box.type("second line")
    expect(box).to_have_value("First line\nsecond line")
    box.press("Enter")

    expect(page.locator(".from-person")).to_have_text(["First line\nsecond line"], use_inner_text=True)
    expect(box).to_have_value("")
    assert Message.objects.get(role="user").content == "First line\nsecond line"


def test_a_reply_with_model_html_stays_inert_in_the_page(
    page: Page, live_app: str, user: User, model_server: ModelServer
) -> None:
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    log_in(page, live_app, user)
    model_server.queue_text(
        "Look <img src=x onerror=alert(1)> <script>alert(2)</script> [x](javascript:alert(3)) "
        '<div hx-post="/x" hx-trigger="load">d</div> [site](https://example.com)'
    )

    send(page, "Show me something")
    reply = page.locator(".from-coach").last
    expect(reply).not_to_have_class(re.compile("streaming"))

    assert reply.locator("img, script, div[hx-post]").count() == 0
    assert reply.locator("a").evaluate_all("links => links.map(a => [a.getAttribute('href'), a.rel])") == [
        ["https://example.com", "noopener noreferrer nofollow"]
    ]
    page.wait_for_timeout(300)
    assert dialogs == []


def test_a_failed_reply_offers_retry_which_answers_without_resending(
    page: Page, live_app: str, user: User, model_server: ModelServer
) -> None:
    log_in(page, live_app, user)
    model_server.queue_error(503)

    send(page, "Plan my week")
    expect(page.get_by_role("alert")).to_contain_text("Your coach couldn't answer just now")
    model_server.queue_text("Here is your week.")
    page.get_by_role("button", name="Retry").click()

    expect(page.locator(".from-coach").last).to_have_text("Here is your week.")
    expect(page.locator(".from-person")).to_have_count(1)
    assert Message.objects.filter(role="user").count() == 1


def test_a_reply_stopped_at_its_length_limit_offers_continue_which_goes_on_in_the_same_bubble(
    page: Page, live_app: str, user: User, model_server: ModelServer
) -> None:
    log_in(page, live_app, user)
    model_server.queue_raw_stream(stream_events("openai", "chat_cut_at_length.sse"))

    send(page, "Plan my week")
    expect(page.locator(".from-coach").last).to_contain_text("This reply reached its length limit.")
    expect(page.get_by_role("button", name="Retry")).to_be_visible()
    model_server.queue_text(" 30 minutes. Tuesday, rest.")
    page.get_by_role("button", name="Continue").click()

    expect(page.locator(".from-coach").last).to_have_text(
        "Here is your week: Monday, an easy run of 30 minutes. Tuesday, rest."
    )
    expect(page.locator(".from-coach")).to_have_count(1)
    expect(page.get_by_role("button", name="Continue")).to_have_count(0)


def test_the_message_box_shows_its_limit_and_an_empty_message_gets_a_clear_error(
    page: Page, live_app: str, user: User, settings
) -> None:
    settings.COACH_MAX_MESSAGE_CHARS = 20
    log_in(page, live_app, user)
    box, count = page.get_by_label("Message"), page.locator("#composer-count")

    box.fill("Twelve chars")
    expect(count).to_be_hidden()
    box.press_sequentially(" and then some more")
    expect(box).to_have_value("Twelve chars and the")
    expect(count).to_have_text("20 / 20")

    box.fill("   ")
    box.press("Enter")
    expect(page.locator("#composer-hint")).to_have_text("Write something first: the message is empty.")
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#composer-error")).to_have_text("Write something first: the message is empty.")
    expect(box).to_have_value("   ")
    assert not Message.objects.exists()


def test_the_message_box_grows_with_its_text(page: Page, live_app: str, user: User) -> None:
    log_in(page, live_app, user)
    box = page.get_by_label("Message")
    before = box.bounding_box()["height"]

    box.fill("\n".join(f"line {n}" for n in range(5)))

    assert box.bounding_box()["height"] > before * 1.5


def test_the_chat_fits_a_phone_and_a_long_reply_scrolls(
    page: Page, live_app: str, user: User, model_server: ModelServer
) -> None:
    page.set_viewport_size({"width": 375, "height": 700})
    log_in(page, live_app, user)
    model_server.queue_text("\n\n".join(f"Paragraph {n} of a long plan." for n in range(60)))

    send(page, "Give me a long plan")
    expect(page.locator(".from-coach").last).to_contain_text("Paragraph 59")

    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    for element in (".from-person", ".from-coach", "#send-button", ".new-session"):
        box = page.locator(element).last.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 375, element
    assert page.evaluate(
        "(() => { const m = document.getElementById('messages'); return m.scrollHeight > m.clientHeight; })()"
    )
    expect(page.get_by_label("Message")).to_be_in_viewport()
    expect(page.locator(".from-coach").last).to_be_in_viewport()
