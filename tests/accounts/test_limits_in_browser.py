"""A change past the limit, as the person meets it in Chromium: the page says to wait, where
it says what went wrong, and leaves what the change would have replaced as it was."""

from __future__ import annotations

import pytest
from django.test import Client
from playwright.sync_api import Page, expect

from memory.models import Memory
from tests.conftest import make_user
from tests.memory.factories import make_memories

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_keep_past_the_limit_says_to_wait_and_keeps_nothing(page: Page, live_app: str, settings) -> None:
    settings.CHANGES_PER_MINUTE = 1
    person = make_user("ada@example.com")
    make_memories(person, 3)
    client = Client()
    client.force_login(person)
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_app}])
    page.goto(live_app + "/memories/")
    page.wait_for_load_state("load")
    next_to_forget = page.locator("#next-to-forget")

    next_to_forget.get_by_role("button", name="Keep").first.click()
    # Kept for good, it leaves the list of what goes next.
    expect(next_to_forget.get_by_role("button", name="Keep")).to_have_count(2)
    next_to_forget.get_by_role("button", name="Keep").first.click()

    expect(page.locator("#page-alert")).to_have_text(
        "That is a lot of changes in a minute. Wait a moment, then try again: nothing was changed."
    )
    expect(next_to_forget.get_by_role("button", name="Keep")).to_have_count(2)
    assert Memory.objects.filter(user=person, source="manual").count() == 1
