"""The look-back's quiet cue as a person meets it, in Chromium over real ASGI: under the
reply as it is written, and again after a reload, each linking to the conversation."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from playwright.sync_api import Page, expect

from accounts.models import User
from coach.look_back import exchanges_index
from coach.models import ChatSession, Message
from offline_coach import ModelServer
from tests.coach.factories import make_session
from tests.coach.test_chat_in_browser import log_in, send

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_look_back_shows_under_the_reply_with_a_link_to_the_conversation_and_stays_after_a_reload(
    page: Page, live_app: str, user: User, model_server: ModelServer
) -> None:
    earlier = make_session(user, "My left knee clicks on the stairs", "Then we skip lunges for now.")
    moment = datetime(2026, 5, 3, 9, 0, tzinfo=UTC)
    ChatSession.objects.filter(pk=earlier.pk).update(created_at=moment, ended_at=moment)
    Message.objects.filter(session=earlier).update(created_at=moment)
    exchanges_index(user_id=user.pk)
    log_in(page, live_app, user)
    page.goto(live_app + "/chat/new")
    model_server.queue_tool_calls([("search_conversations", {"query": "knee clicks stairs", "limit": None})])
    model_server.queue_text("In May you said your knee clicks on the stairs: step-ups, then.", chunk_delay_seconds=0.05)

    send(page, "Do you remember what I said about my knee?")

    cue = page.locator(".look-back-cue")
    expect(cue).to_have_text("Looked back at: your conversation of 3 May · Open")
    expect(cue.get_by_role("link", name="Open")).to_have_attribute("href", f"/chat/{earlier.pk}/")
    expect(page.locator(".from-coach").last).to_contain_text("In May you said")
    page.reload()
    expect(page.locator(".look-back-cue")).to_have_text("Looked back at: your conversation of 3 May · Open")
    page.locator(".look-back-cue").get_by_role("link", name="Open").click()
    expect(page.get_by_role("heading", name="My left knee clicks on the stairs")).to_be_visible()
