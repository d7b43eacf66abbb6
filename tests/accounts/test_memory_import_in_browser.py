"""Importing in Chromium, against the app as it is served (uvicorn, with its request-size
limit): copy the prompt, paste the answer, untick, edit, save; and a paste too large to
send is stopped on the page, with a sentence, the text still in the box."""

from __future__ import annotations

import pytest
from django.test import Client
from playwright.sync_api import Page, Request, expect

from accounts.models import User
from memory.imports.splitting import IMPORT_MAX_CHARS
from memory.models import Memory
from tests.accessibility import assert_accessible
from tests.conftest import make_user
from tests.memory.test_imports import CHATGPT_ANSWER, CHATGPT_FACTS

pytestmark = pytest.mark.django_db(transaction=True)

PASTE_LABEL = "The assistant's answer"
EDITED = "Ada: a nurse on night shifts, four on and three off"


@pytest.fixture
def person(page: Page, live_app: str) -> User:
    """A person logged in in the browser (their session cookie, set on the page)."""
    user = make_user("ada@example.com")
    client = Client()
    client.force_login(user)
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_app}])
    return user


def test_a_person_pastes_an_answer_unticks_two_edits_one_and_sees_the_ten_on_the_memory_page(
    page: Page, live_app: str, person: User
) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_app)
    page.goto(live_app + "/memories/")
    page.get_by_role("link", name="Import what ChatGPT, Claude or Gemini knows about you").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Bring what another assistant knows about you")
    assert_accessible(page, "the import page")

    page.get_by_role("button", name="Copy the prompt").click()
    expect(page.locator(".copy-status")).to_have_text("Copied. Paste it into a new chat with the other assistant.")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == page.locator("#import-prompt").inner_text().strip()
    assert copied.startswith("I'm moving to a new assistant")

    page.get_by_label(PASTE_LABEL).fill(CHATGPT_ANSWER)
    page.get_by_role("button", name="Show me what it found").click()

    proposals = page.locator(".import-proposal")
    expect(proposals).to_have_count(12)
    expect(page.get_by_role("button", name="Save 12 memories")).to_be_visible()
    for place in (1, 9):
        page.locator(f"#proposal-{place}").get_by_label("Save this").uncheck()
    page.locator("#proposal-0").get_by_label("What your coach should remember").fill(EDITED)
    expect(page.locator("[data-ticked-count]")).to_have_text("10 of 12 to save")
    assert_accessible(page, "the proposals, two unticked")
    page.get_by_role("button", name="Save 10 memories").click()

    expect(page).to_have_url(live_app + "/memories/#memory-groups")
    expect(page.locator(".message.success")).to_contain_text("Saved 10 memories from your import.")
    shown = page.locator("#memory-groups .memory-summary")
    expect(shown).to_have_count(10)
    expected = [EDITED, *(fact for n, fact in enumerate(CHATGPT_FACTS) if n not in (0, 1, 9))]
    assert sorted(shown.all_inner_texts()) == sorted(expected)
    saved = Memory.objects.filter(user=person)
    assert sorted(m.summary for m in saved) == sorted(expected)
    assert {m.source for m in saved} == {"user"}


def test_a_megabyte_paste_is_stopped_on_the_page_with_a_sentence_and_stays_in_the_box(
    page: Page, live_app: str, person: User
) -> None:
    megabyte = "- You like tea\n" * (2**20 // 15 + 1)
    sent: list[Request] = []
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_app)
    page.goto(live_app + "/memories/import")
    page.on("request", lambda request: sent.append(request) if request.method == "POST" else None)

    # Pasted as a person pastes, from the clipboard (typing a megabyte would take minutes).
    page.evaluate("text => navigator.clipboard.writeText(text)", megabyte)
    box = page.get_by_label(PASTE_LABEL)
    box.focus()
    page.keyboard.press("Control+V")
    assert box.evaluate("box => box.value.length") == len(megabyte)
    page.get_by_role("button", name="Show me what it found").click()

    alert = page.get_by_role("alert").filter(has_text="an import takes at most")
    expect(alert).to_have_text(
        f"That is {len(megabyte.strip()):,} characters; an import takes at most {IMPORT_MAX_CHARS:,} at a time. "
        "Paste the first part now, save it, then import the rest."
    )
    expect(box).to_be_focused()
    expect(box).to_have_attribute("aria-invalid", "true")
    assert box.evaluate("box => box.value.length") == len(megabyte)
    assert page.url == live_app + "/memories/import"
    assert sent == []
    assert_accessible(page, "a paste too large to send")
    assert not Memory.objects.filter(user=person).exists()


def test_on_a_phone_a_refused_paste_is_said_at_the_top_in_view_and_read_first(
    page: Page, live_app: str, person: User
) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(live_app + "/memories/import")
    page.get_by_label(PASTE_LABEL).fill("<ul>\n<li>Allergic to peanuts</li>\n</ul>")
    page.get_by_role("button", name="Show me what it found").click()

    problem = page.locator("#import-problem")
    expect(problem).to_contain_text("Every line of this has HTML in it")
    expect(problem).to_be_focused()
    expect(problem).to_be_in_viewport()
    problem.get_by_role("link", name="Go to what you pasted").click()
    expect(page.get_by_label(PASTE_LABEL)).to_have_value("<ul>\n<li>Allergic to peanuts</li>\n</ul>")
    assert_accessible(page, "a refused paste, on a phone")


def test_a_fact_that_differs_from_a_kept_one_is_saved_in_its_place_when_the_person_chooses_so(
    page: Page, live_app: str, person: User
) -> None:
    from tests.memory.factories import make_memory

    job = make_memory(person, "job", tier="profile", category="background", summary="You're a pharmacist")
    page.goto(live_app + "/memories/import")
    page.get_by_label(PASTE_LABEL).fill("- You teach chemistry at a secondary school\n- You like tea")
    page.get_by_role("button", name="Show me what it found").click()

    differs = page.locator("#proposal-0")
    expect(differs.locator(".kept-memory")).to_contain_text("You're a pharmacist")
    expect(differs.get_by_label("What you keep now")).to_be_checked()
    expect(page.get_by_role("button", name="Save 1 memory")).to_be_visible()
    assert_accessible(page, "a fact that differs from a kept one")
    differs.get_by_label("This, in its place").check()
    page.get_by_role("button", name="Save 2 memories").click()

    expect(page.locator(f"#memory-{job.pk} .memory-summary")).to_have_text("You teach chemistry at a secondary school")
    expect(page.locator(f"#memory-{job.pk} .author")).to_have_text("Imported from ChatGPT")
    assert Memory.objects.filter(user=person).count() == 2
