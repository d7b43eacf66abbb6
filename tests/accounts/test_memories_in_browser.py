"""The memory page in Chromium: a person edits, adds and deletes memories in place."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from playwright.sync_api import Dialog, Page, expect

from accounts.models import User
from memory.context import assemble_memory_context
from memory.models import Memory, MemoryEvent
from offline_coach import ModelServer
from tests.conftest import make_user
from tests.memory.factories import make_memories, make_memory

pytestmark = pytest.mark.django_db(transaction=True)

SUMMARY = "What your coach should remember"


@pytest.fixture
def person(page: Page, live_server) -> User:
    """A person logged in in the browser (their session cookie, set on the page)."""
    user = make_user("ada@example.com")
    client = Client()
    client.force_login(user)
    page.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    return user


def open_memories(page: Page, live_server) -> None:
    page.goto(live_server.url + "/memories/")
    # Set on this page: a reload or a navigation would lose it.
    page.evaluate("window.sameDocument = true")


def still_the_same_document(page: Page) -> bool:
    return page.evaluate("window.sameDocument === true")


def test_a_person_edits_a_memory_and_sees_the_new_text_without_a_reload(page: Page, live_server, person: User) -> None:
    memory = make_memory(person, "breakfast", summary="Oats every morning")
    open_memories(page, live_server)
    row = page.locator(f"#memory-{memory.pk}")

    row.get_by_role("link", name="Edit").click()
    summary = row.get_by_label(SUMMARY)
    expect(summary).to_be_focused()
    summary.fill("Eggs every morning")
    row.get_by_role("button", name="Save").click()

    expect(row).to_contain_text("Eggs every morning")
    expect(row).to_contain_text("Kept: you wrote it")
    expect(row).not_to_contain_text("Oats every morning")
    assert still_the_same_document(page)
    memory.refresh_from_db()
    assert memory.source == "manual" and memory.key == "habit-1"
    text = assemble_memory_context(user=person, now=timezone.now()).text
    assert "Eggs every morning" in text and "Oats every morning" not in text


def test_an_edited_memory_is_what_the_next_chat_turn_sends_to_the_model(
    page: Page, live_app: str, model_server: ModelServer
) -> None:
    person = make_user("ada@example.com")
    memory = make_memory(person, "breakfast", summary="Oats every morning")
    client = Client()
    client.force_login(person)
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_app}])
    page.goto(live_app + "/memories/")
    page.evaluate("window.sameDocument = true")
    row = page.locator(f"#memory-{memory.pk}")

    row.get_by_role("link", name="Edit").click()
    row.get_by_label(SUMMARY).fill("Eggs every morning")
    row.get_by_role("button", name="Save").click()
    expect(row).to_contain_text("Eggs every morning")
    assert still_the_same_document(page)

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Chat").click()
    model_server.queue_text("Eggs it is.")
    page.get_by_label("Message").fill("What should I eat before training?")
    page.get_by_label("Message").press("Enter")
    expect(page.locator(".from-coach").last).to_have_text("Eggs it is.")

    prompt = ModelServer.system_prompt(model_server.chat_requests()[-1])
    assert "Eggs every morning" in prompt
    assert "Oats every morning" not in prompt


def test_an_edit_that_is_too_long_says_so_in_place_and_keeps_the_text(page: Page, live_server, person: User) -> None:
    memory = make_memory(person, "breakfast", summary="Oats every morning")
    open_memories(page, live_server)
    row = page.locator(f"#memory-{memory.pk}")
    typed = "Eggs " * 40

    row.get_by_role("link", name="Edit").click()
    row.get_by_label(SUMMARY).fill(typed)
    row.get_by_role("button", name="Save").click()

    expect(row).to_contain_text("Keep this to 150 characters")
    expect(row.get_by_label(SUMMARY)).to_have_value(typed)
    assert still_the_same_document(page)
    assert Memory.objects.get(pk=memory.pk).summary == "Oats every morning"


def test_cancelling_an_edit_puts_the_memory_back(page: Page, live_server, person: User) -> None:
    memory = make_memory(person, "breakfast", summary="Oats every morning")
    open_memories(page, live_server)
    row = page.locator(f"#memory-{memory.pk}")

    row.get_by_role("link", name="Edit").click()
    row.get_by_label(SUMMARY).fill("Something else")
    row.get_by_role("link", name="Cancel").click()

    expect(row).to_contain_text("Oats every morning")
    expect(row.get_by_role("link", name="Edit")).to_be_visible()
    assert still_the_same_document(page)


def test_a_person_deletes_a_memory_after_confirming(page: Page, live_server, person: User) -> None:
    memory = make_memory(person, "breakfast", summary="Oats every morning")
    open_memories(page, live_server)
    row = page.locator(f"#memory-{memory.pk}")

    row.get_by_role("link", name="Delete").click()
    expect(row).to_contain_text("Delete this memory?")
    row.get_by_role("button", name="Delete", exact=True).click()

    expect(row).to_contain_text("Deleted: “Oats every morning”")
    expect(row.get_by_role("button", name="Undo")).to_be_visible()
    assert still_the_same_document(page)
    assert not Memory.objects.filter(user=person).exists()


def focused(page: Page) -> dict[str, str]:
    """What holds the focus: its id, its tag, its control name, and its memory's id."""
    return page.evaluate(
        """() => {
          const element = document.activeElement;
          const article = element && element.closest("article");
          return {
            id: element ? element.id : "", tag: element ? element.tagName.toLowerCase() : "",
            control: (element && element.dataset.control) || "", memory: article ? article.id : "",
          };
        }"""
    )


def counts_at_the_top(page: Page) -> str:
    return " ".join(page.locator("#memory-counts").inner_text().split())


def test_delete_then_undo_brings_the_same_memory_back_with_the_counts_and_focus_right(
    page: Page, live_server, person: User
) -> None:
    _newest, middle, oldest = reversed(make_memories(person, 3))
    middle = Memory.objects.get(pk=middle.pk)
    was = (middle.summary, middle.content, middle.source, middle.category, middle.created_at, middle.updated_at)
    open_memories(page, live_server)
    assert counts_at_the_top(page) == "3 memories 0 kept for good 0 emails sent"
    row = page.locator(f"#memory-{middle.pk}")

    row.get_by_role("link", name="Delete").click()
    row.get_by_role("button", name="Delete", exact=True).click()

    expect(row).to_contain_text("Deleted: “note number 1”")
    expect(page.locator("#memory-counts")).to_contain_text("2 memories")
    expect(page.locator("#tier-episodic-count")).to_have_text("2")
    # The focus goes on to the next memory, not to the top of the page.
    expect(page.locator(f"#memory-{oldest.pk}")).to_be_focused()
    assert focused(page)["id"] == f"memory-{oldest.pk}"
    assert not Memory.objects.filter(pk=middle.pk).exists()

    row.get_by_role("button", name="Undo").click()

    expect(row).to_contain_text("note number 1")
    expect(row.get_by_role("link", name="Edit")).to_be_visible()
    expect(page.locator("#memory-counts")).to_contain_text("3 memories")
    expect(page.locator("#tier-episodic-count")).to_have_text("3")
    expect(row).to_be_focused()
    assert focused(page)["id"] == f"memory-{middle.pk}"
    assert still_the_same_document(page)
    back = Memory.objects.get(pk=middle.pk)
    assert (back.summary, back.content, back.source, back.category, back.created_at, back.updated_at) == was


def test_deleting_the_last_memory_of_a_list_focuses_the_one_before_then_the_lists_heading(
    page: Page, live_server, person: User
) -> None:
    newer, older = reversed(make_memories(person, 2))
    open_memories(page, live_server)

    for memory in (older, newer):
        row = page.locator(f"#memory-{memory.pk}")
        row.get_by_role("link", name="Delete").click()
        row.get_by_role("button", name="Delete", exact=True).click()
        expect(row).to_contain_text("Deleted")

        expected = f"#memory-{newer.pk}" if memory == older else "#tier-episodic-title"
        expect(page.locator(expected)).to_be_focused()
        assert focused(page)["id"] == expected[1:]
    expect(page.locator("#memory-counts")).to_contain_text("0 memories")


def test_cancel_gives_the_focus_back_to_the_control_that_opened_it(page: Page, live_server, person: User) -> None:
    memory = make_memory(person, "breakfast", summary="Oats every morning")
    make_memories(person, 2)
    open_memories(page, live_server)
    row = page.locator(f"#memory-{memory.pk}")

    row.get_by_role("link", name="Edit").click()
    expect(row.get_by_label(SUMMARY)).to_be_focused()
    row.get_by_role("link", name="Cancel").click()
    expect(row.get_by_role("link", name="Edit")).to_be_focused()
    assert focused(page) == {"id": "", "tag": "a", "control": "edit", "memory": f"memory-{memory.pk}"}

    row.get_by_role("link", name="Delete").click()
    expect(row.locator(".confirm-question")).to_be_focused()
    row.get_by_role("link", name="Cancel").click()
    expect(row.get_by_role("link", name="Delete")).to_be_focused()
    assert focused(page) == {"id": "", "tag": "a", "control": "delete", "memory": f"memory-{memory.pk}"}
    assert still_the_same_document(page)


def test_escape_puts_the_editor_and_the_delete_question_away_and_asks_before_dropping_what_was_typed(
    page: Page, live_server, person: User
) -> None:
    memory = make_memory(person, "breakfast", summary="Oats every morning")
    open_memories(page, live_server)
    row = page.locator(f"#memory-{memory.pk}")

    row.get_by_role("link", name="Edit").click()
    expect(row.get_by_label(SUMMARY)).to_be_focused()
    page.keyboard.press("Escape")
    expect(row.get_by_role("link", name="Edit")).to_be_focused()

    row.get_by_role("link", name="Delete").click()
    expect(row.locator(".confirm-question")).to_be_focused()
    page.keyboard.press("Escape")
    expect(row.get_by_role("link", name="Delete")).to_be_focused()

    row.get_by_role("link", name="Edit").click()
    row.get_by_label(SUMMARY).fill("Eggs every morning")
    asked: list[str] = []
    # The person says no the first time, yes the second.
    answers = [False, True]

    def answer(dialog: Dialog) -> None:
        asked.append(dialog.message)
        if answers.pop(0):
            dialog.accept()
        else:
            dialog.dismiss()

    page.on("dialog", answer)
    page.keyboard.press("Escape")
    expect(row.get_by_label(SUMMARY)).to_have_value("Eggs every morning")
    row.get_by_label(SUMMARY).press("Escape")
    expect(row.get_by_role("link", name="Edit")).to_be_focused()

    assert asked == ["Discard your changes to this memory?"] * 2
    expect(row).to_contain_text("Oats every morning")
    assert Memory.objects.get(pk=memory.pk).summary == "Oats every morning"
    assert still_the_same_document(page)


def test_the_counts_at_the_top_follow_an_addition_and_a_keep(page: Page, live_server, person: User) -> None:
    oldest = make_memories(person, 2)[0]
    open_memories(page, live_server)
    add = page.locator("#add")

    add.get_by_text("Always remember this").click()
    add.get_by_label(SUMMARY).fill("I am vegetarian")
    add.get_by_role("button", name="Remember this").click()
    expect(page.locator("#memory-counts")).to_contain_text("3 memories")
    expect(page.locator("#memory-counts")).to_contain_text("1 kept for good")

    page.locator("#next-to-forget").get_by_role("button", name="Keep").first.click()
    expect(page.locator("#memory-counts")).to_contain_text("2 kept for good")
    expect(page.locator(f"#memory-{oldest.pk}")).to_contain_text("Kept: you wrote it")
    assert counts_at_the_top(page) == "3 memories 2 kept for good 0 emails sent"
    assert still_the_same_document(page)


def test_a_person_adds_a_memory_that_appears_in_its_tier(page: Page, live_server, person: User) -> None:
    open_memories(page, live_server)
    add = page.locator("#add")

    add.get_by_text("Always remember this").click()
    add.get_by_label(SUMMARY).fill("I am vegetarian")
    add.get_by_label("Category").select_option("preference")
    add.get_by_role("button", name="Remember this").click()

    expect(add).to_contain_text("Saved. Your coach will always remember this.")
    expect(add.get_by_label(SUMMARY)).to_have_value("")
    profile = page.locator("#tier-profile")
    memory = Memory.objects.get(user=person)
    assert (memory.key, memory.summary) == ("preference-1", "I am vegetarian")
    expect(profile.locator(f"#memory-{memory.pk}")).to_contain_text("Kept: you wrote it")
    expect(profile.get_by_text("Nothing yet.")).to_be_hidden()
    assert still_the_same_document(page)


def test_the_date_fields_show_only_for_something_to_bring_up_later(page: Page, live_server, person: User) -> None:
    open_memories(page, live_server)
    add = page.locator("#add")
    add.get_by_text("Always remember this").click()

    expect(add.get_by_label("Bring it up on")).to_be_hidden()
    add.get_by_label("Tier").select_option("prospective")
    expect(add.get_by_label("Bring it up on")).to_be_visible()


def test_a_person_restores_a_forgotten_memory(page: Page, live_server, person: User) -> None:
    gone = make_memory(person, "rain", summary="Runs in the rain")
    MemoryEvent.objects.create(
        user=person,
        memory_id=gone.pk,
        key="rain",
        actor="system",
        action="evicted",
        reason="room",
        before=gone.snapshot(),
    )
    gone_id = gone.pk
    gone.delete()
    open_memories(page, live_server)

    page.locator("#forgotten").get_by_role("button", name="Restore").click()

    expect(page.locator(f"#tier-episodic #memory-{gone_id}")).to_contain_text("Kept: you wrote it")
    expect(page.locator("#forgotten")).not_to_contain_text("Runs in the rain")
    assert still_the_same_document(page)


def test_the_memory_pages_raise_no_content_security_policy_violations(page: Page, live_server, person: User) -> None:
    violations: list[str] = []
    page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
    shoulder = make_memory(person, "shoulder", source="user", category="injury", summary="Bad left shoulder")
    make_memory(person, "talk", tier="prospective", category="project", due_at=timezone.now() + timedelta(days=30))
    make_memories(person, 3)

    open_memories(page, live_server)
    page.locator(f"#memory-{shoulder.pk}").get_by_text("History", exact=True).click()
    expect(page.locator(f"#memory-{shoulder.pk} .memory-history")).to_contain_text("No history recorded.")
    page.locator("#coach-sees").get_by_text("Show it").click()
    expect(page.locator("#coach-sees pre.context-text")).to_contain_text("Bad left shoulder")
    page.get_by_role("searchbox").fill("shoulder")
    expect(page.locator("#memory-groups")).to_contain_text("1 match for “shoulder”")
    page.goto(live_server.url + "/account/")
    page.wait_for_load_state("networkidle")

    assert violations == []


def test_the_memory_page_fits_a_phone(page: Page, live_server, person: User) -> None:
    make_memory(person, "long", summary="A" * 150, content="word " * 300)
    make_memories(person, 3)
    page.set_viewport_size({"width": 360, "height": 740})

    for path in ("/memories/", "/account/"):
        page.goto(live_server.url + path)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), path


def test_deleted_and_what_your_coach_sees_states_have_no_serious_accessibility_violation(
    page: Page, live_server, person: User
) -> None:
    from tests.accessibility import assert_accessible

    shoulder = make_memory(person, "shoulder", source="user", category="injury", summary="Bad left shoulder")
    notes = make_memories(person, 3)
    open_memories(page, live_server)
    row = page.locator(f"#memory-{notes[0].pk}")

    row.get_by_role("link", name="Delete").click()
    expect(row.locator(".confirm-question")).to_be_focused()
    assert_accessible(page, "a delete waiting for confirmation")
    row.get_by_role("button", name="Delete", exact=True).click()
    expect(row.get_by_role("button", name="Undo")).to_be_visible()
    assert_accessible(page, "a memory deleted, with its Undo")

    coach_sees = page.locator("#coach-sees")
    coach_sees.get_by_text("Show it").click()
    expect(coach_sees.locator(f'[data-memory-id="{shoulder.pk}"]')).to_contain_text("You told your coach")
    coach_sees.get_by_text("The exact text your coach receives").click()
    exact = coach_sees.get_by_role("region", name="The exact text your coach receives")
    expect(exact).to_contain_text("Bad left shoulder")
    exact.focus()
    expect(exact).to_be_focused()
    assert_accessible(page, "what your coach sees, the exact text open")

    page.goto(live_server.url + "/memories/context")
    expect(page.get_by_role("heading", name="Injuries")).to_be_visible()
    assert_accessible(page, "the page of what your coach sees")


def test_the_browser_keeps_no_copy_of_the_memory_page_after_a_search(page: Page, live_server, person: User) -> None:
    # htmx would otherwise keep each page it swaps away from in the browser's storage, where
    # it outlives signing out: a person's memories, readable by whoever uses the tab next.
    make_memory(person, "shoulder", source="user", category="injury", summary="Bad left shoulder")
    make_memory(person, "oats", summary="Oats every morning")
    open_memories(page, live_server)

    page.get_by_role("searchbox").fill("shoulder")
    expect(page.locator("#memory-groups")).to_contain_text("1 match for “shoulder”")
    page.get_by_role("searchbox").fill("oats")
    expect(page.locator("#memory-groups")).to_contain_text("1 match for “oats”")
    page.go_back()
    expect(page.locator("#memory-groups")).to_contain_text("1 match for “shoulder”")

    stored = page.evaluate("JSON.stringify([{...window.localStorage}, {...window.sessionStorage}])")
    assert "Oats every morning" not in stored and "Bad left shoulder" not in stored
