"""A database that refuses writes (a hot standby after a failover, or one set read-only)
is answered with the page's own error and a 503, never a 500, and nothing is half-written
(coach/middleware.py). Against a real web process whose every database session is
read-only: reads answer, each write fails with ReadOnlySqlTransaction."""

from __future__ import annotations

import urllib.parse
import uuid
from collections.abc import Iterator

import pytest
from django.test import Client
from django.utils.html import escape
from playwright.sync_api import Page, expect

from accounts.models import User
from coach.middleware import CANNOT_SAVE
from coach.models import ChatSession, Message
from coach.views.pages import CANNOT_SAVE as MESSAGE_NOT_SAVED
from offline_coach import ModelServer
from tests.coach.factories import make_session
from tests.coach.sse import post_form, session_cookie
from tests.coach.test_chat_in_browser import send as send_in_browser
from tests.coach.test_resumable_turn import app_env
from tests.conftest import PASSWORD
from tests.processes import app_process

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = "I ran 5 km this morning"


def read_only(database_url: str) -> str:
    """The same database, each session of it read-only from its start."""
    options = urllib.parse.urlencode({"options": "-c default_transaction_read_only=on"})
    return urllib.parse.urlsplit(database_url)._replace(query=options).geturl()


@pytest.fixture
def read_only_app(model_server: ModelServer) -> Iterator[str]:
    env = app_env(model_server)
    with app_process({**env, "DATABASE_URL": read_only(env["DATABASE_URL"])}) as app:
        yield app.url


@pytest.fixture
def cookie(user: User, client: Client) -> str:
    client.force_login(user)
    return session_cookie(client)


def send(url: str, text: str, *, cookie: str, htmx: bool) -> tuple[int, str]:
    return post_form(url, {"text": text, "client_id": str(uuid.uuid4())}, cookie=cookie, htmx=htmx)


def test_a_message_sent_with_htmx_is_refused_in_words_the_composer_shows(
    read_only_app: str, user: User, cookie: str
) -> None:
    session = make_session(user, "Hello", "Hello! What is on your mind?")

    status, body = send(f"{read_only_app}/chat/{session.pk}/messages", TEXT, cookie=cookie, htmx=True)

    # Plain text on a 503: the page puts it beside the message box, which keeps the text.
    assert (status, body) == (503, MESSAGE_NOT_SAVED)
    assert list(Message.objects.filter(session=session).values_list("content", flat=True)) == [
        "Hello",
        "Hello! What is on your mind?",
    ]


def test_a_message_sent_as_a_plain_form_gets_the_page_back_with_its_text_in_the_box(
    read_only_app: str, user: User, cookie: str
) -> None:
    session = make_session(user, "Hello", "Hello! What is on your mind?")

    status, page = send(f"{read_only_app}/chat/{session.pk}/messages", TEXT, cookie=cookie, htmx=False)

    assert status == 503
    assert f'role="alert">{escape(MESSAGE_NOT_SAVED)}</p>' in page
    assert f">{TEXT}</textarea>" in page
    assert "Hello! What is on your mind?" in page, "the conversation, read from the database, is shown"
    assert Message.objects.filter(session=session).count() == 2


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain-form"])
def test_a_first_message_starts_no_conversation_and_keeps_its_text(
    read_only_app: str, user: User, cookie: str, htmx: bool
) -> None:
    status, body = send(f"{read_only_app}/chat/new", TEXT, cookie=cookie, htmx=htmx)

    assert status == 503
    assert (body == MESSAGE_NOT_SAVED) if htmx else (f">{TEXT}</textarea>" in body)
    assert not ChatSession.objects.exists() and not Message.objects.exists()


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain-form"])
def test_any_other_form_that_saves_is_refused_with_a_503_that_says_so(
    read_only_app: str, user: User, cookie: str, htmx: bool
) -> None:
    session = make_session(user, "Hello", "Hello! What is on your mind?")

    status, body = post_form(f"{read_only_app}/chat/{session.pk}/end", {}, cookie=cookie, htmx=htmx)

    assert status == 503
    if htmx:
        assert body == CANNOT_SAVE
    else:
        assert "<h1>We can't save right now</h1>" in body
    assert ChatSession.objects.get(pk=session.pk).ended_at is None


def test_signing_in_is_refused_with_a_503_that_says_so(read_only_app: str, user: User, settings) -> None:
    # The web process knows only the production hashers.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    user.set_password(PASSWORD)
    user.save()
    status, body = post_form(
        f"{read_only_app}/accounts/login/", {"login": user.email, "password": PASSWORD}, cookie="", htmx=False
    )

    assert status == 503
    assert "<h1>We can't save right now</h1>" in body


def test_in_the_browser_the_message_box_says_so_and_keeps_the_text(
    read_only_app: str, page: Page, user: User, client: Client
) -> None:
    # The web process is asked first, so it stops after the page is closed (and checked).
    session = make_session(user, "Hello", "Hello! What is on your mind?")
    client.force_login(user)  # signing in is a write too: the login is made beforehand
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": read_only_app}])
    page.goto(f"{read_only_app}/chat/{session.pk}")

    send_in_browser(page, TEXT)

    expect(page.locator("#composer-error")).to_have_text(MESSAGE_NOT_SAVED)
    expect(page.get_by_label("Message")).to_have_value(TEXT)
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    assert Message.objects.filter(session=session).count() == 2
