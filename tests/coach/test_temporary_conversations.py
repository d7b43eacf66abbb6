"""A temporary conversation ("Don't remember this conversation"): never listed, never named
by what was said in it, said so at the top while it lasts, and deleted with everything
said in it when the person leaves it (unless a page of it is still open), when it ends,
or when they sign out. A conversation held while memory is off is not remembered, but
stays theirs to read."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.test import Client
from django.utils import timezone

from accounts.memory_setting import user_memory_set
from accounts.models import User
from coach.models import ChatSession, Message
from coach.services import message_post, session_start
from coach.temporary import (
    LEAVE_GRACE_SECONDS,
    temporary_conversation_left,
    temporary_conversations_sweep,
    viewer_close,
    viewer_seen,
)
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

SECRET = "I have never told anyone about the qzsecret debt"


@pytest.fixture
def client_of(client: Client, user: User) -> Client:
    client.force_login(user)
    return client


def temporary(user: User, text: str = SECRET) -> ChatSession:
    session = session_start(user=user, remembered=False)
    message_post(session=session, text=text, client_id=None)
    session.refresh_from_db()
    return session


def exists(session: ChatSession) -> bool:
    return ChatSession.objects.filter(pk=session.pk).exists()


def test_a_temporary_conversation_chosen_on_the_first_message_is_temporary_and_not_remembered(
    client_of: Client, user: User
) -> None:
    response = client_of.post("/chat/new", {"text": SECRET, "client_id": str(uuid.uuid4()), "not_remembered": "1"})

    session = ChatSession.objects.get(user=user)
    assert response.status_code == 302
    assert (session.temporary, session.remembered, session.title) == (True, False, "")


def test_a_temporary_conversation_is_never_listed_nor_named_by_what_was_said_and_says_so_at_the_top(
    client_of: Client, user: User
) -> None:
    kept = session_start(user=user, first_message="Plan my week")
    session = temporary(user)

    page = client_of.get(f"/chat/{session.pk}/").content.decode()

    assert "qzsecret" not in page.split('<div id="messages"')[0], "not in the title, the list or the heading"
    assert "<title>Temporary conversation · Coach</title>" in page
    assert f'href="/chat/{session.pk}/"' not in page and f'href="/chat/{kept.pk}/"' in page
    notice = page.index("Temporary conversation: deleted when you leave it.")
    assert notice < page.index('id="messages"'), "said above the conversation, while it lasts"
    assert f'data-leave-url="/chat/{session.pk}/left"' in page
    assert "End and delete" in page
    elsewhere = client_of.get(f"/chat/{kept.pk}/").content.decode()
    assert f'href="/chat/{session.pk}/"' not in elsewhere and "Temporary conversation" not in elsewhere


def test_the_chat_never_opens_on_a_temporary_conversation_it_was_left_for(client_of: Client, user: User) -> None:
    kept = session_start(user=user, first_message="Plan my week")
    temporary(user)

    assert client_of.get("/").url == f"/chat/{kept.pk}/"


def test_a_page_left_deletes_the_conversation_once_no_page_of_it_is_open(client_of: Client, user: User) -> None:
    session = temporary(user)

    response = client_of.post(f"/chat/{session.pk}/left")

    assert response.status_code == 204
    left = ChatSession.objects.get(pk=session.pk).left_at
    assert temporary_conversations_sweep(now=left + timedelta(seconds=LEAVE_GRACE_SECONDS - 1)) == 0
    assert temporary_conversations_sweep(now=left + timedelta(seconds=LEAVE_GRACE_SECONDS)) == 1
    assert not exists(session) and not Message.objects.filter(session_id=session.pk).exists()


def test_a_reload_or_another_tab_keeps_a_temporary_conversation_whose_page_was_left(user: User) -> None:
    session = temporary(user)
    # The page that was left said so after the reloaded one opened its stream.
    async_to_sync(viewer_seen)(session.pk, "reloaded-page")
    left = timezone.now()
    temporary_conversation_left(user_id=user.pk, session_id=session.pk, now=left)

    assert temporary_conversations_sweep(now=left + timedelta(seconds=LEAVE_GRACE_SECONDS)) == 0

    assert exists(session) and ChatSession.objects.get(pk=session.pk).left_at is None
    # Once that page closes too, and says so, it goes.
    async_to_sync(viewer_close)(session.pk, "reloaded-page")
    temporary_conversation_left(user_id=user.pk, session_id=session.pk, now=left)
    assert temporary_conversations_sweep(now=left + timedelta(seconds=LEAVE_GRACE_SECONDS)) == 1


def test_loading_a_page_of_it_again_takes_back_that_it_was_left(client_of: Client, user: User) -> None:
    session = temporary(user)
    temporary_conversation_left(user_id=user.pk, session_id=session.pk)

    client_of.get(f"/chat/{session.pk}/")

    assert ChatSession.objects.get(pk=session.pk).left_at is None


def test_a_temporary_conversation_idle_with_no_page_open_is_deleted_and_one_still_open_is_kept(user: User) -> None:
    shown, closed = temporary(user, "First of two"), temporary(user, "Second of two")
    async_to_sync(viewer_seen)(shown.pk, "open-page")
    idle = timezone.now() - timedelta(minutes=31)
    ChatSession.objects.filter(pk__in=[shown.pk, closed.pk]).update(last_message_at=idle)

    assert temporary_conversations_sweep() == 1

    assert exists(shown) and not exists(closed)


def test_signing_out_deletes_every_temporary_conversation_and_nothing_else(client_of: Client, user: User) -> None:
    kept = session_start(user=user, first_message="Plan my week")
    first, second = temporary(user, "One"), temporary(user, "Two")

    client_of.post("/accounts/logout/")

    assert exists(kept) and not exists(first) and not exists(second)


def test_a_conversation_held_with_memory_off_is_not_remembered_but_stays_listed_and_is_never_deleted(
    client_of: Client, user: User
) -> None:
    user_memory_set(user=user, enabled=False)
    session = session_start(user=user, first_message="Plan my week")
    ChatSession.objects.filter(pk=session.pk).update(last_message_at=timezone.now() - timedelta(days=2))

    temporary_conversations_sweep()

    session.refresh_from_db()
    assert (session.remembered, session.temporary) == (False, False)
    assert f'href="/chat/{session.pk}/"' in client_of.get("/chat/new").content.decode()


def test_only_the_persons_own_temporary_conversation_can_be_said_left(client_of: Client, user: User) -> None:
    other = make_user("other-temporary@example.com")
    theirs = temporary(other)
    remembered = session_start(user=user, first_message="Plan my week")

    assert client_of.post(f"/chat/{theirs.pk}/left").status_code == 404
    assert client_of.post(f"/chat/{remembered.pk}/left").status_code == 404
    assert client_of.get(f"/chat/{temporary(user).pk}/left").status_code == 405
    assert ChatSession.objects.get(pk=theirs.pk).left_at is None
    client_of.logout()
    assert client_of.post(f"/chat/{theirs.pk}/left").status_code == 302
