"""The newcomer's first hour, in Chromium at a laptop's and a phone's size, as one walk:
the landing page, signing up (a mistake first), the link of the verification mail, the
welcome, a first conversation in which the coach keeps a fact, that fact on the memory page
(the editor put away with Escape), and the export, read as the person reads it. Each state
is checked with axe on the way."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from memory.models import Memory
from offline_coach import ModelServer
from tests.accessibility import assert_accessible
from tests.accounts.test_signup_in_browser import sign_up_and_confirm
from tests.coach.test_chat_in_browser import send
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)

SIZES = {"laptop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
TRIP = {
    "key": "trip-may",
    "tier": "prospective",
    "category": "project",
    "summary": "You're going on a climbing trip to Kalymnos in May",
    "content": "You're going on a climbing trip to Kalymnos in May.",
    "due_at": None,
    "keep_separate": None,
}


@pytest.mark.parametrize("size", SIZES)
def test_a_newcomer_walks_from_the_landing_page_to_their_export(
    page: Page, live_app: str, model_server: ModelServer, size: str, tmp_path: Path
) -> None:
    page.set_viewport_size(SIZES[size])
    page.goto(live_app + "/")
    expect(page.get_by_role("heading", level=1)).to_contain_text("A coach that remembers you")
    assert_accessible(page, f"the landing page ({size})")

    page.get_by_role("main").get_by_role("link", name="Create your account").first.click()
    page.get_by_label("Email:").fill("new@example")
    page.get_by_label("Password:", exact=True).fill(PASSWORD)
    page.get_by_label("Password (again):").fill(PASSWORD)
    page.get_by_role("button", name="Sign Up").click()
    # The mistake is named under the box it is about, and the box says so.
    email = page.get_by_label("Email:")
    expect(email).to_have_attribute("aria-invalid", "true")
    error = page.locator("#id_email_error")
    expect(error).to_be_visible()
    assert error.bounding_box()["y"] > email.bounding_box()["y"]
    assert_accessible(page, f"sign-up with a mistake ({size})")
    sign_up_and_confirm(page, live_app, "new@example.com")
    assert_accessible(page, f"the welcome ({size})")
    page.get_by_role("button", name="Skip for now").click()
    expect(page.get_by_role("heading", name="Your coach")).to_be_visible()

    model_server.queue_tool_calls([("save_memory", TRIP)])
    model_server.queue_text("Kalymnos in May: let's plan your training around it.")
    send(page, "I'm going on a climbing trip to Kalymnos in May.")
    expect(page.locator(".from-coach").last).to_have_text("Kalymnos in May: let's plan your training around it.")
    cue = page.locator(".memory-cue")
    expect(cue).to_have_text(f"Saved to memory: {TRIP['summary']} · View · Undo")
    if size == "phone":
        # The conversation has the screen: the sidebar is one row of controls, its list folded.
        height = page.locator("#messages").bounding_box()["height"]
        assert height > 0.6 * SIZES[size]["height"], height
        # The conversation's title has a line of its own, not a word beside the controls.
        title = page.locator(".chat-header h1").bounding_box()["width"]
        assert title > 0.8 * SIZES[size]["width"], title
    assert_accessible(page, f"a first conversation ({size})")

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Memories").click()
    memory = Memory.objects.get(user__email="new@example.com")
    row = page.locator(f"#memory-{memory.pk}")
    expect(row).to_contain_text(TRIP["summary"])
    expect(page.get_by_role("main")).not_to_contain_text("trip-may")
    row.get_by_role("link", name="Edit").click()
    expect(row.get_by_label("What your coach should remember")).to_be_focused()
    assert_accessible(page, f"editing a memory ({size})")
    page.keyboard.press("Escape")
    expect(row.get_by_role("link", name="Edit")).to_be_focused()

    page.goto(live_app + "/account/")
    with page.expect_download() as started:
        page.get_by_role("link", name="Download my data").click()
        page.wait_for_load_state()
        if "reauthenticate" in page.url:
            page.get_by_label("Password").fill(PASSWORD)
            page.get_by_role("button", name="Confirm").click()
    with zipfile.ZipFile(started.value.path()) as archive:
        archive.extractall(tmp_path)
    [folder] = tmp_path.iterdir()
    page.goto((folder / "your-data.html").as_uri())
    expect(page.get_by_role("heading", name=TRIP["summary"])).to_be_visible()
    expect(page.get_by_role("main")).to_contain_text("I'm going on a climbing trip to Kalymnos in May.")
    expect(page.get_by_role("main")).not_to_contain_text("trip-may")
    assert_accessible(page, f"the export's page ({size})")
