"""A conversation's page in steps: its latest exchanges first, earlier ones on request (htmx
in place of the link that asked, or a plain link without JavaScript), so a long
conversation's page is no larger than a short one's, read through the conversation's
index of messages in order."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from playwright.sync_api import Page, expect

from accounts.models import User
from coach.models import ChatSession, Message
from coach.services import session_start
from coach.views.pages import EXCHANGES_PER_STEP
from tests.coach.test_chat_in_browser import log_in

LONG_REPLY = "Three short runs, one long one, and a rest day after the long one. " * 4


def conversation(user: User, exchanges: int) -> ChatSession:
    session = session_start(user=user)
    for n in range(1, exchanges + 1):
        said = Message.objects.create(session=session, role="user", content=f"Message number {n}", status="answered")
        Message.objects.create(
            session=session, role="assistant", content=f"Reply {n}. {LONG_REPLY}", status="complete", reply_to=said
        )
    return session


def said(session: ChatSession, number: int) -> Message:
    """The person's message number `number` (from 1) in the conversation."""
    return Message.objects.filter(session=session, role="user").order_by("pk")[number - 1]


def said_on(html: str) -> list[int]:
    """The person's messages the page shows, in order (the last one is also in the box
    that edits it)."""
    return list(dict.fromkeys(int(n) for n in re.findall(r"Message number (\d+)", html)))


def signed_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_a_long_conversation_opens_on_its_latest_exchanges_with_a_link_to_earlier_ones(user: User) -> None:
    session = conversation(user, 25)

    page = signed_in(user).get(f"/chat/{session.pk}/").content.decode()

    assert said_on(page) == list(range(16, 26))
    first_shown = said(session, 16)
    assert f'href="/chat/{session.pk}/?before={first_shown.pk}#messages"' in page
    assert "Earlier messages" in page


@pytest.mark.django_db
def test_a_short_conversation_shows_everything_and_no_link(user: User) -> None:
    session = conversation(user, EXCHANGES_PER_STEP)

    page = signed_in(user).get(f"/chat/{session.pk}/").content.decode()

    assert said_on(page) == list(range(1, EXCHANGES_PER_STEP + 1))
    assert "Earlier messages" not in page


@pytest.mark.django_db
def test_htmx_gets_the_step_before_in_place_of_the_link_that_asked(user: User) -> None:
    session = conversation(user, 25)
    client = signed_in(user)
    before = said(session, 16)

    step = client.get(f"/chat/{session.pk}/?before={before.pk}", headers={"HX-Request": "true"}).content.decode()

    assert said_on(step) == list(range(6, 16))
    assert "<html" not in step and 'id="composer"' not in step
    earliest = said(session, 6)
    assert f"?before={earliest.pk}" in step
    last = client.get(f"/chat/{session.pk}/?before={earliest.pk}", headers={"HX-Request": "true"}).content.decode()
    assert said_on(last) == list(range(1, 6))
    assert "Earlier messages" not in last


@pytest.mark.django_db
def test_without_javascript_the_link_opens_the_earlier_step_with_a_way_back_and_no_message_box(user: User) -> None:
    session = conversation(user, 25)
    before = said(session, 16)

    page = signed_in(user).get(f"/chat/{session.pk}/?before={before.pk}").content.decode()

    assert said_on(page) == list(range(6, 16))
    assert f'href="/chat/{session.pk}/#composer">Back to the latest messages' in page
    assert 'id="composer"' not in page


@pytest.mark.django_db
def test_a_nonsense_step_opens_the_latest_exchanges(user: User) -> None:
    session = conversation(user, 12)

    page = signed_in(user).get(f"/chat/{session.pk}/?before=soon").content.decode()

    assert said_on(page) == list(range(3, 13))


@pytest.mark.django_db
def test_another_persons_conversation_is_not_found_at_any_step(user: User, other_user: User) -> None:
    session = conversation(other_user, 12)
    message = said(session, 12)

    response = signed_in(user).get(f"/chat/{session.pk}/?before={message.pk}", headers={"HX-Request": "true"})

    assert response.status_code == 404


@pytest.mark.django_db
def test_the_page_of_200_exchanges_is_within_one_and_a_half_times_the_page_of_10(user: User) -> None:
    short, long = conversation(user, 10), conversation(user, 200)
    client = signed_in(user)

    sizes = [len(client.get(f"/chat/{session.pk}/").content) for session in (short, long)]

    assert sizes[1] <= 1.5 * sizes[0], sizes


@pytest.mark.django_db
def test_a_long_conversations_page_makes_the_statements_a_short_ones_makes(
    user: User, django_assert_max_num_queries
) -> None:
    short, long = conversation(user, 3), conversation(user, 200)
    client = signed_in(user)
    client.get(f"/chat/{short.pk}/")

    with django_assert_max_num_queries(12) as made:
        client.get(f"/chat/{long.pk}/")
    with django_assert_max_num_queries(len(made)):
        client.get(f"/chat/{short.pk}/")


@pytest.mark.django_db(transaction=True)
def test_earlier_messages_load_above_in_the_browser_and_keep_what_is_read_in_view(
    page: Page, live_app: str, user: User
) -> None:
    log_in(page, live_app, user)
    session = conversation(user, 25)
    page.goto(f"{live_app}/chat/{session.pk}/")
    page.wait_for_load_state("load")
    expect(page.locator(".from-person")).to_have_count(10)
    expect(page.locator(".from-person").last).to_have_text("Message number 25")

    page.get_by_role("link", name="Earlier messages").click()
    expect(page.locator(".from-person")).to_have_count(20)
    # What was at the top when the person asked is still in view, not scrolled away.
    expect(page.get_by_text("Message number 16", exact=True)).to_be_in_viewport()
    page.get_by_role("link", name="Earlier messages").click()

    expect(page.locator(".from-person")).to_have_count(25)
    expect(page.locator(".from-person")).to_have_text([f"Message number {n}" for n in range(1, 26)])
    expect(page.get_by_role("link", name="Earlier messages")).to_have_count(0)
    expect(page.get_by_text("Message number 6", exact=True)).to_be_in_viewport()
