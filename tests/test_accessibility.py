"""Every page state a person can reach, checked with axe-core in Chromium at a laptop's and
a phone's size: no serious or critical violation anywhere. (Every other browser test also
checks the state it ends on: see the `page` fixture in tests/conftest.py.)"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from playwright.sync_api import Page, expect

from accounts.models import User
from coach.models import Message
from memory.drafts import MemoryDraft
from memory.models import Memory, MemoryEvent, MemoryOverlap
from memory.proposals import proposal_make
from tests.accessibility import assert_accessible, blocking_violations
from tests.coach.factories import make_session
from tests.conftest import PASSWORD, make_user
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db(transaction=True)

SIZES = {"laptop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}

State = Callable[[Page, str], None]


def signed_in(page: Page, base: str, user: User) -> None:
    client = Client()
    client.force_login(user)
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": base}])


def a_person_with_a_history() -> tuple[User, dict[str, int]]:
    """Someone a few weeks in: memories of each kind, a suggestion and a look-alike waiting,
    one memory forgotten, a conversation answered and one reply that failed."""
    person = make_user("ada@example.com")
    knee = make_memory(person, "knee", source="onboarding", category="injury", tier="profile", summary="Bad left knee")
    coach_knee = make_memory(person, "knee-2", category="injury", summary="Left knee sore after long runs")
    make_memory(person, "oats", summary="Oats every morning")
    make_memory(
        person,
        "talk",
        tier="prospective",
        category="project",
        summary="Talk at the library",
        due_at=timezone.now() + timedelta(days=12),
    )
    peanuts = make_memory(person, "peanuts", source="user", category="allergy", summary="Allergic to peanuts")
    proposal_make(
        user=person,
        memory=peanuts,
        kind="update",
        reason="You said cashews make you ill too",
        draft=MemoryDraft(
            key="peanuts", tier="profile", category="allergy", summary="Allergic to all nuts", content=""
        ),
    )
    MemoryOverlap.objects.create(user=person, memory=coach_knee, other=knee, similarity=0.91)
    gone = make_memory(person, "old-note", summary="Tried yoga once")
    MemoryEvent.objects.create(
        user=person,
        memory_id=gone.pk,
        key="old-note",
        actor="system",
        action="evicted",
        reason="the oldest unprotected memory when more than 60 were stored",
        before=gone.snapshot(),
    )
    gone.delete()
    session = make_session(person, "I ran 5k today", "Well done! How did the knee feel?", "Fine, a bit stiff")
    # Long enough that the conversation scrolls, on a laptop too.
    long = make_session(person, *[f"Message number {n}, about the week's training and how it went." for n in range(40)])
    failed = Message.objects.filter(session=session, role="user").last()
    Message.objects.filter(pk=failed.pk).update(status="failed")
    # Answered twice: its first answer a page back, its memory's cue with an Undo.
    anew = make_session(person, "Plan my week around the knee", "Three easy runs.")
    earlier = Message.objects.get(session=anew, role="assistant")
    Message.objects.filter(pk=earlier.pk).update(status="replaced")
    Message.objects.create(
        session=anew, role="assistant", content="Two runs and a swim.", status="complete", reply_to=earlier.reply_to
    )
    knee_note = make_memory(person, "knee-plan", summary="Plans the week around the knee")
    Memory.objects.filter(pk=knee_note.pk).update(message_id=earlier.reply_to_id)
    ids = {"session": session.pk, "long": long.pk, "memory": knee.pk}
    return person, {**ids, "anew": anew.pk, "earlier": earlier.pk}


def visitor_states() -> dict[str, State]:
    def login_error(page: Page, base: str) -> None:
        page.goto(base + "/accounts/login/")
        page.get_by_label("Email:").fill("nobody@example.com")
        page.get_by_label("Password:").fill("not the password")
        page.get_by_role("button", name="Sign In").click()
        expect(page.get_by_text("are not correct")).to_be_visible()

    def signup_error(page: Page, base: str) -> None:
        page.goto(base + "/accounts/signup/")
        page.get_by_role("button", name="Sign Up").click()

    def signed_in_with_its_message(page: Page, base: str) -> None:
        page.goto(base + "/accounts/login/")
        page.get_by_label("Email:").fill("returning@example.com")
        page.get_by_label("Password:").fill(PASSWORD)
        page.get_by_role("button", name="Sign In").click()
        expect(page.locator(".messages .message").first).to_be_visible()
        page.context.clear_cookies()

    return {
        "landing": lambda page, base: page.goto(base + "/"),
        "sign in": lambda page, base: page.goto(base + "/accounts/login/"),
        "sign in, wrong password": login_error,
        "sign up": lambda page, base: page.goto(base + "/accounts/signup/"),
        "sign up, nothing filled in": signup_error,
        "password reset": lambda page, base: page.goto(base + "/accounts/password/reset/"),
        "using a real model": lambda page, base: page.goto(base + "/help/model"),
        "help, where to turn in a crisis": lambda page, base: page.goto(base + "/help/"),
        # Last: it signs in (and out again, by dropping the cookie, for the next size).
        "signed in, with a message saying so": signed_in_with_its_message,
    }


def person_states(ids: dict[str, int]) -> dict[str, State]:
    session, memory = ids["session"], ids["memory"]

    def editing(page: Page, base: str) -> None:
        page.goto(base + "/memories/")
        page.locator(f"#memory-{memory}").get_by_role("link", name="Edit").click()
        expect(page.locator(f"#memory-{memory} form")).to_be_visible()

    def confirming_delete(page: Page, base: str) -> None:
        page.goto(base + "/memories/")
        page.locator(f"#memory-{memory}").get_by_role("link", name="Delete").click()
        expect(page.locator(f"#memory-{memory} form")).to_be_visible()

    def adding_with_errors(page: Page, base: str) -> None:
        page.goto(base + "/memories/")
        page.locator("#add summary").click()
        page.locator("#add-form").get_by_role("button", name="Remember this").click()
        expect(page.locator("#add-form .errorlist").first).to_be_visible()

    def editing_a_message(page: Page, base: str) -> None:
        page.goto(f"{base}/chat/{ids['anew']}/")
        page.locator(".message-edit summary").click()
        expect(page.get_by_label("Edit what you wrote")).to_be_visible()

    return {
        "onboarding": lambda page, base: page.goto(base + "/welcome/"),
        "chat with an answer and a failed reply": lambda page, base: page.goto(f"{base}/chat/{session}/"),
        "a conversation long enough to scroll": lambda page, base: page.goto(f"{base}/chat/{ids['long']}/"),
        "chat, editing the last message": editing_a_message,
        "chat, an earlier answer paged back to": lambda page, base: page.goto(
            f"{base}/chat/{ids['anew']}/?answer={ids['earlier']}"
        ),
        "memories": lambda page, base: page.goto(base + "/memories/"),
        "memories, searched for nothing": lambda page, base: page.goto(base + "/memories/?q=zebra"),
        "memories, editing one": editing,
        "memories, confirming a delete": confirming_delete,
        "memories, adding with nothing filled in": adding_with_errors,
        "a memory": lambda page, base: page.goto(f"{base}/memories/{memory}/"),
        "a memory's history": lambda page, base: page.goto(f"{base}/memories/{memory}/history"),
        "forgotten memories": lambda page, base: page.goto(base + "/memories/forgotten/"),
        "what your coach sees": lambda page, base: page.goto(base + "/memories/context"),
        "delete all memories": lambda page, base: page.goto(base + "/account/delete-memories"),
        "account": lambda page, base: page.goto(base + "/account/"),
        "delete the account": lambda page, base: page.goto(base + "/account/delete"),
    }


def check(page: Page, base: str, states: dict[str, State], size: str) -> list[str]:
    page.set_viewport_size(SIZES[size])
    found: list[str] = []
    for name, reach in states.items():
        reach(page, base)
        page.wait_for_load_state("networkidle")
        found += [f"{name} ({size}): {line}" for line in blocking_violations(page)]
    return found


@pytest.mark.parametrize("size", SIZES)
def test_no_page_a_visitor_meets_has_a_serious_accessibility_violation(page: Page, live_app: str, size: str) -> None:
    make_user("returning@example.com")

    found = check(page, live_app, visitor_states(), size)

    assert found == [], "\n".join(found)


@pytest.mark.parametrize("size", SIZES)
def test_no_page_a_person_meets_has_a_serious_accessibility_violation(page: Page, live_app: str, size: str) -> None:
    person, ids = a_person_with_a_history()
    signed_in(page, live_app, person)

    found = check(page, live_app, person_states(ids), size)

    assert found == [], "\n".join(found)


def test_the_checker_finds_what_it_is_meant_to_find(page: Page) -> None:
    # A status list (the flash messages as they were) and a scroll box no keyboard reaches.
    page.set_content(
        '<html lang="en"><head><title>t</title></head><body><main><h1>t</h1>'
        '<ul role="status"><li>Saved</li></ul>'
        '<div style="overflow:auto;height:2rem"><p>a</p><p>b</p><p>c</p><p>d</p></div></main></body></html>'
    )

    found = " ".join(blocking_violations(page))

    assert "listitem" in found and "scrollable-region-focusable" in found
    with pytest.raises(AssertionError, match="listitem"):
        assert_accessible(page, "a page built to fail")
