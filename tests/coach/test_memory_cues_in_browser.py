"""The line under a reply that names what the coach kept, in Chromium: its Undo is a control
that looks like one (the View link's colour, underlined), as streamed and after a reload."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from accounts.models import User
from offline_coach import ModelServer
from tests.coach.factories import TALK_SAVE
from tests.coach.test_answer_anew_in_browser import answered_with_a_save
from tests.coach.test_chat_in_browser import log_in

pytestmark = pytest.mark.django_db(transaction=True)

LOOKS = """e => {
  const style = getComputedStyle(e);
  return {colour: style.color, underlined: style.textDecorationLine.includes("underline")};
}"""


def test_undo_under_a_reply_looks_like_the_view_link_beside_it_not_like_grey_text(
    page: Page, live_app: str, user: User, model_server: ModelServer
) -> None:
    log_in(page, live_app, user)
    answered_with_a_save(page, model_server, "I'm giving a talk in June", TALK_SAVE, "Good luck with the talk.")

    for drawn in ("as streamed", "after a reload"):
        cue = page.locator(".memory-cue")
        view = cue.get_by_role("link", name="View").evaluate(LOOKS)
        undo = cue.get_by_role("button", name="Undo").evaluate(LOOKS)
        assert undo == view and undo["underlined"], (drawn, undo, view)
        page.reload()
        expect(page.locator(".memory-cue")).to_contain_text("Saved to memory")
