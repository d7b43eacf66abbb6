"""What one person may ask of the chat, and what a refused or oversized form says: each
limit refused with its own message (429), nothing stored twice, nothing stored at all
when refused."""

from __future__ import annotations

import threading
import uuid
from urllib.parse import urlencode

import pytest
from django.db import connection, transaction
from django.test import Client

from accounts.models import User
from coach.claims import message_retry
from coach.models import ChatSession, Message
from coach.services import TooManyTurns, message_post, message_post_as, session_start
from coach.views.pages import TOO_MANY_MESSAGES, TOO_MANY_SESSIONS, TOO_MANY_TURNS
from tests.coach.factories import make_session
from tests.coach.races import race

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


@pytest.fixture
def client_of(client: Client, user: User) -> Client:
    client.force_login(user)
    return client


def send(client: Client, session: ChatSession, text: str, **headers: str):
    return client.post(
        f"/chat/{session.pk}/messages", {"text": text, "client_id": str(uuid.uuid4())}, headers={**HTMX, **headers}
    )


def start(client: Client, text: str, client_id: str | None = None, *, htmx: bool = True):
    data = {"text": text, "client_id": client_id or str(uuid.uuid4())}
    return client.post("/chat/new", data, headers=HTMX if htmx else {})


def test_the_eleventh_message_in_a_minute_is_refused_and_not_stored(client_of: Client, user: User, settings) -> None:
    settings.COACH_MAX_TURNS_AT_ONCE = 100
    session = make_session(user)

    sent = [send(client_of, session, f"Message number {n}") for n in range(10)]
    eleventh = send(client_of, session, "One too many")

    assert [response.status_code for response in sent] == [200] * 10
    assert eleventh.status_code == 429
    assert TOO_MANY_MESSAGES in eleventh.content.decode()
    assert eleventh["HX-Retarget"] == "#composer-error"
    assert Message.objects.filter(session=session).count() == 10
    assert "One too many" not in [message.content for message in Message.objects.filter(session=session)]


def test_a_third_reply_at_once_waits_for_one_of_the_first_two(client_of: Client, user: User) -> None:
    # In this test no turn can see its message (it is not committed), so both stay waiting.
    session = make_session(user)
    send(client_of, session, "First")
    send(client_of, session, "Second")

    third = send(client_of, session, "Third")

    assert third.status_code == 429
    assert TOO_MANY_TURNS in third.content.decode()
    assert list(Message.objects.filter(session=session).values_list("content", flat=True)) == ["First", "Second"]


def test_a_second_conversation_started_within_the_window_is_refused(client_of: Client, user: User, settings) -> None:
    settings.COACH_SESSIONS_PER_MINUTE = 1

    first = start(client_of, "Hello")
    second = start(client_of, "Hello again")

    assert first.status_code == 200 and first["HX-Redirect"]
    assert second.status_code == 429
    assert TOO_MANY_SESSIONS in second.content.decode()
    assert ChatSession.objects.filter(user=user).count() == 1


def test_ten_posts_with_one_client_id_start_one_conversation(client_of: Client, user: User, settings) -> None:
    settings.COACH_SESSIONS_PER_MINUTE = 100
    client_id = str(uuid.uuid4())

    responses = [start(client_of, "Plan my week", client_id, htmx=False) for _ in range(10)]

    session = ChatSession.objects.get(user=user)
    assert {response.url for response in responses} == {f"/chat/{session.pk}/"}
    assert Message.objects.filter(session__user=user).count() == 1


@pytest.mark.parametrize("text", ["", "  \n\t "])
def test_an_empty_first_message_is_refused_as_inside_a_conversation(client_of: Client, user: User, text: str) -> None:
    session = make_session(user)
    inside = send(client_of, session, text)

    first = start(client_of, text)

    assert first.status_code == inside.status_code == 422
    assert first.content == inside.content
    assert "Write something first: the message is empty." in first.content.decode()
    assert ChatSession.objects.filter(user=user).count() == 1


def test_without_javascript_a_refusal_shows_the_page_with_the_text_kept(client_of: Client, user: User) -> None:
    session = make_session(user)
    send(client_of, session, "First")
    send(client_of, session, "Second")

    response = client_of.post(
        f"/chat/{session.pk}/messages", {"text": "Keep these words", "client_id": str(uuid.uuid4())}
    )

    html = response.content.decode()
    assert response.status_code == 429
    assert TOO_MANY_TURNS in html
    assert ">Keep these words</textarea>" in html


@pytest.mark.parametrize("encoding", ["urlencoded", "multipart"])
def test_a_megabyte_message_is_refused_with_a_sentence_not_a_bare_error(
    client_of: Client, user: User, encoding: str
) -> None:
    session = make_session(user)
    form = {"text": "ü€" * 500_000, "client_id": str(uuid.uuid4())}

    if encoding == "urlencoded":
        # As a browser (and htmx) sends a form.
        body = urlencode(form)
        response = client_of.post(
            f"/chat/{session.pk}/messages", body, content_type="application/x-www-form-urlencoded", headers=HTMX
        )
    else:
        response = client_of.post(f"/chat/{session.pk}/messages", form, headers=HTMX)

    assert response.status_code == 413
    assert response["Content-Type"].startswith("text/plain")
    assert "too much to send at once" in response.content.decode()
    assert "4,000 characters" in response.content.decode()
    assert not Message.objects.filter(session=session).exists()


def test_the_message_box_says_its_limit(client_of: Client, user: User, settings) -> None:
    settings.COACH_MAX_MESSAGE_CHARS = 1234
    session = make_session(user)

    html = client_of.get(f"/chat/{session.pk}/").content.decode()

    assert 'maxlength="1234"' in html
    assert "Enter sends · Shift+Enter adds a line" in html


def test_every_model_call_is_capped_by_max_tokens(transactional_db: None, user: User, model_server, settings) -> None:
    from asgiref.sync import async_to_sync

    from coach.services import message_post, session_start
    from coach.turn import turn_run

    settings.COACH_MAX_TOKENS = 321
    message = message_post(session=session_start(user=user), text="Plan my week", client_id=None)

    async_to_sync(turn_run)(user_id=user.pk, message_id=message.pk)

    # The demo looks its memories up first, then answers: every round is capped.
    assert {body["max_tokens"] for body in model_server.chat_requests()} == {321}


def failed_message(session: ChatSession, text: str) -> Message:
    message = message_post(session=session, text=text, client_id=None)
    Message.objects.filter(pk=message.pk).update(status="failed")
    return message


def retry(client: Client, message: Message):
    return client.post(f"/chat/{message.session_id}/messages/{message.pk}/retry", headers=HTMX)


def test_a_retry_counts_with_new_messages_against_two_replies_at_once(client_of: Client, user: User) -> None:
    session = make_session(user)
    failed = failed_message(session, "Failed earlier")
    send(client_of, session, "First")
    send(client_of, session, "Second")

    refused = retry(client_of, failed)

    assert refused.status_code == 429
    assert TOO_MANY_TURNS in refused.content.decode()
    failed.refresh_from_db()
    assert failed.status == "failed", "not asked again"


def test_retries_count_against_messages_a_minute(client_of: Client, user: User, settings) -> None:
    settings.COACH_MAX_TURNS_AT_ONCE = 100
    settings.COACH_MESSAGES_PER_MINUTE = 3
    session = make_session(user)
    failed = [failed_message(session, f"Failed {n}") for n in range(4)]

    responses = [retry(client_of, message) for message in failed]

    assert [response.status_code for response in responses] == [200, 200, 200, 429]
    assert TOO_MANY_MESSAGES in responses[-1].content.decode()


# Replies at once are the person's, whichever conversations they are in -------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("second_in", ["another conversation", "a new conversation", "a retry elsewhere"])
def test_replies_at_once_are_counted_across_the_persons_conversations_when_posts_meet(
    user: User, settings, second_in: str
) -> None:
    """Two posts meet: the first holds its transaction open until the second waits on it,
    then commits; the second counts the first's message among the person's replies at once."""
    settings.COACH_MAX_TURNS_AT_ONCE = 1
    first_session, other = make_session(user), make_session(user)
    failed = failed_message(other, "Failed earlier")
    holding, release = threading.Event(), threading.Event()
    outcomes: list[str] = []

    def first() -> None:
        with transaction.atomic():
            message_post_as(user_id=user.pk, session_id=first_session.pk, text="First", client_id=None, turns_at_most=1)
            holding.set()
            release.wait(10)

    def second() -> None:
        try:
            if second_in == "another conversation":
                message_post_as(user_id=user.pk, session_id=other.pk, text="Second", client_id=None, turns_at_most=1)
            elif second_in == "a new conversation":
                session_start(user=user, first_message="Second", turns_at_most=1)
            else:
                message_retry(message=failed, turns_at_most=1)
        except TooManyTurns:
            outcomes.append("refused")
        else:
            outcomes.append("accepted")

    race(first, second, holding=holding, release=release)

    assert outcomes == ["refused"]
    assert Message.objects.filter(session__user=user, role="user", status__in=["pending", "answering"]).count() == 1


def test_six_conversations_posted_to_at_once_run_at_most_the_limit(transactional_db: None, user: User) -> None:
    sessions = [make_session(user) for _ in range(6)]
    barrier = threading.Barrier(6)
    accepted: list[int] = []

    def post(session: ChatSession) -> None:
        barrier.wait(10)
        try:
            message_post_as(user_id=user.pk, session_id=session.pk, text="At once", client_id=None, turns_at_most=2)
            accepted.append(session.pk)
        except TooManyTurns:
            pass
        finally:
            connection.close()

    threads = [threading.Thread(target=post, args=(session,)) for session in sessions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)

    assert len(accepted) == 2
