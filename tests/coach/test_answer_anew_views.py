"""Regenerate and Edit as forms of the chat page (coach/views/answer_anew.py), and the pager
through a message's answers: who may use them, what each answers with and without htmx,
and every refusal said beside the form, with what was typed kept."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from django.utils.html import escape

from accounts.models import User
from coach.answer_anew import ENDED, NOT_LAST, STILL_ANSWERING
from coach.models import ChatSession, Message
from coach.services import message_post, session_end
from coach.views.answer_anew import OUT_OF_DATE, TOO_MANY_ASKS
from memory.models import Memory
from tests.coach.factories import make_session
from tests.conftest import make_user
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


@pytest.fixture
def client_of(client: Client, user: User) -> Client:
    client.force_login(user)
    return client


def last_message(session: ChatSession) -> Message:
    return session.messages.filter(role="user").order_by("-pk").first()


def regenerate(client: Client, message: Message, *, htmx: bool = True, asked_at: str | None = None):
    asked = message.waiting_since.isoformat() if asked_at is None else asked_at
    url = f"/chat/{message.session_id}/messages/{message.pk}/regenerate"
    return client.post(url, {"asked_at": asked}, headers=HTMX if htmx else {})


def edit(client: Client, message: Message, text: str, *, htmx: bool = True):
    url = f"/chat/{message.session_id}/messages/{message.pk}/edit"
    return client.post(url, {"text": text, "asked_at": message.waiting_since.isoformat()}, headers=HTMX if htmx else {})


def statuses(message: Message) -> list[tuple[str, str]]:
    return list(Message.objects.filter(reply_to=message).order_by("pk").values_list("status", "content"))


def test_regenerate_answers_with_the_exchange_being_answered_again(client_of: Client, user: User) -> None:
    session = make_session(user, "Plan my week", "Three easy runs.")
    message = last_message(session)

    response = regenerate(client_of, message)

    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith(f'<article class="exchange" id="exchange-{message.pk}">'), "the partial only"
    assert f'data-stream-url="/chat/{session.pk}/messages/{message.pk}/reply"' in html
    assert "1 / 1" not in html and "2 / 2" in html, "the answer being written is the second"
    assert statuses(message) == [("replaced", "Three easy runs.")]


def test_edit_answers_with_the_exchange_of_the_new_words(client_of: Client, user: User) -> None:
    session = make_session(user, "My left knee hurts", "Rest it.")
    message = last_message(session)

    response = edit(client_of, message, "My right knee hurts")

    html = response.content.decode()
    assert response.status_code == 200
    assert "My right knee hurts" in html and "left knee" not in html and "Rest it." not in html
    assert "data-stream-url" in html
    assert Message.objects.get(pk=message.pk).content == "My right knee hurts"


@pytest.mark.parametrize("form", ["regenerate", "edit"])
def test_without_htmx_the_form_returns_to_the_conversation_at_the_exchange(
    client_of: Client, user: User, form: str
) -> None:
    session = make_session(user, "Plan my week", "Three easy runs.")
    message = last_message(session)

    response = (
        regenerate(client_of, message, htmx=False)
        if form == "regenerate"
        else edit(client_of, message, "x", htmx=False)
    )

    assert response.status_code == 302 and response.url == f"/chat/{session.pk}/#exchange-{message.pk}"
    page = client_of.get(response.url).content.decode()
    assert 'http-equiv="refresh"' in page, "without JavaScript the page refreshes until the answer is in"


@pytest.mark.parametrize("form", ["regenerate", "edit"])
def test_another_persons_message_is_a_404_and_stays_as_it_was(client: Client, user: User, form: str) -> None:
    session = make_session(user, "private words", "reply")
    message = last_message(session)
    client.force_login(make_user("stranger@example.com"))

    response = regenerate(client, message) if form == "regenerate" else edit(client, message, "mine now")

    assert response.status_code == 404
    assert Message.objects.get(pk=message.pk).content == "private words"
    assert statuses(message) == [("complete", "reply")]


@pytest.mark.parametrize("form", ["regenerate", "edit"])
def test_a_message_of_theirs_named_under_another_of_their_conversations_is_a_404(
    client_of: Client, user: User, form: str
) -> None:
    first, second = make_session(user, "hi", "hello"), make_session(user, "again", "hello again")
    message = last_message(first)
    url = f"/chat/{second.pk}/messages/{message.pk}/{form}"

    assert client_of.post(url, {"text": "x", "asked_at": ""}, headers=HTMX).status_code == 404


@pytest.mark.parametrize("form", ["regenerate", "edit"])
def test_anonymous_visitors_are_sent_to_log_in(client: Client, user: User, form: str) -> None:
    session = make_session(user, "hi", "hello")

    response = client.post(f"/chat/{session.pk}/messages/{last_message(session).pk}/{form}")

    assert response.status_code == 302 and response.url.startswith("/accounts/login/")


@pytest.mark.parametrize("form", ["regenerate", "edit"])
def test_a_get_is_refused(client_of: Client, user: User, form: str) -> None:
    session = make_session(user, "hi", "hello")

    response = client_of.get(f"/chat/{session.pk}/messages/{last_message(session).pk}/{form}")

    assert response.status_code == 405


def test_a_refusal_by_htmx_is_plain_words_with_its_status(client_of: Client, user: User) -> None:
    session = make_session(user, "Plan my week", "Three runs.", "And next week?", "Four runs.")
    first = session.messages.filter(role="user").order_by("pk").first()

    response = regenerate(client_of, first)

    assert response.status_code == 409
    assert response["Content-Type"].startswith("text/plain") and response.content.decode() == NOT_LAST


def test_a_message_being_answered_is_refused_with_words(client_of: Client, user: User) -> None:
    session = make_session(user)
    message = message_post(session=session, text="Plan my week", client_id=None)
    Message.objects.filter(pk=message.pk).update(status="answering")

    response = edit(client_of, message, "Plan my month")

    assert (response.status_code, response.content.decode()) == (409, STILL_ANSWERING)
    assert Message.objects.get(pk=message.pk).content == "Plan my week"


def test_without_htmx_a_refusal_where_no_form_is_offered_is_said_under_the_exchange(
    client_of: Client, user: User
) -> None:
    session = make_session(user, "Plan my week", "Three runs.")
    message = last_message(session)
    session_end(session=session)

    response = edit(client_of, message, "Plan my whole month", htmx=False)

    html = response.content.decode()
    assert response.status_code == 409
    exchange = html.split(f'id="exchange-{message.pk}"')[1].split("</article>")[0]
    assert f'<p class="answer-error" role="alert">{escape(ENDED)}</p>' in exchange
    assert Message.objects.get(pk=message.pk).content == "Plan my week"


def test_without_htmx_a_refused_edit_keeps_the_words_typed_in_its_open_box(
    client_of: Client, user: User, settings
) -> None:
    settings.COACH_MAX_MESSAGE_CHARS = 20
    session = make_session(user, "Plan my week", "Three runs.")
    message = last_message(session)

    response = edit(client_of, message, "Plan my whole month of training", htmx=False)

    html = response.content.decode()
    assert response.status_code == 422
    edit_form = html.split('<details class="message-edit" open>')[1].split("</details>")[0]
    assert ">Plan my whole month of training</textarea>" in edit_form
    assert re.search(r'id="edit-error-\d+" role="alert">That message is 31 characters', edit_form)


def test_without_htmx_a_refused_regenerate_says_why_beside_its_button(client_of: Client, user: User, settings) -> None:
    settings.COACH_MESSAGES_PER_MINUTE = 0
    session = make_session(user, "Plan my week", "Three runs.")
    message = last_message(session)

    response = regenerate(client_of, message, htmx=False)

    assert response.status_code == 429
    assert f'id="regenerate-error-{message.pk}" role="alert">{TOO_MANY_ASKS}</p>' in response.content.decode()
    assert statuses(message) == [("complete", "Three runs.")]


def test_a_form_whose_time_is_no_time_is_refused_as_out_of_date(client_of: Client, user: User) -> None:
    session = make_session(user, "Plan my week", "Three runs.")
    message = last_message(session)

    for asked_at in ("yesterday", "2026-01-01T10:00:00"):
        response = regenerate(client_of, message, asked_at=asked_at)
        assert (response.status_code, response.content.decode()) == (400, OUT_OF_DATE)
    assert statuses(message) == [("complete", "Three runs.")]


def test_the_same_click_twice_is_one_answer_and_the_second_is_shown_it(client_of: Client, user: User) -> None:
    session = make_session(user, "Plan my week", "Three runs.")
    message = last_message(session)

    first, second = regenerate(client_of, message), regenerate(client_of, message)

    assert first.status_code == second.status_code == 200
    assert "data-stream-url" in second.content.decode()
    assert statuses(message) == [("replaced", "Three runs.")]


def test_only_the_last_exchange_of_a_conversation_under_way_offers_edit_and_regenerate(
    client_of: Client, user: User
) -> None:
    session = make_session(user, "Plan my week", "Three runs.", "And next week?", "Four runs.")
    first, last = session.messages.filter(role="user").order_by("pk")

    html = client_of.get(f"/chat/{session.pk}/").content.decode()

    assert f"/messages/{first.pk}/regenerate" not in html and f"/messages/{first.pk}/edit" not in html
    assert f'action="/chat/{session.pk}/messages/{last.pk}/regenerate"' in html
    assert f'action="/chat/{session.pk}/messages/{last.pk}/edit"' in html
    assert f'name="asked_at" value="{last.waiting_since.isoformat()}"' in html
    session_end(session=session)
    assert "/regenerate" not in client_of.get(f"/chat/{session.pk}/").content.decode()


def test_the_pager_shows_the_latest_answer_and_pages_back_to_an_earlier_one(client_of: Client, user: User) -> None:
    session = make_session(user, "Plan my week", "Three easy runs.")
    message = last_message(session)
    Message.objects.filter(reply_to=message).update(status="replaced")
    Message.objects.create(
        session=session, role="assistant", content="Two runs and a swim.", status="complete", reply_to=message
    )
    earlier = Message.objects.get(reply_to=message, status="replaced")

    latest = client_of.get(f"/chat/{session.pk}/").content.decode()
    paged = client_of.get(f"/chat/{session.pk}/messages/{message.pk}/?answer={earlier.pk}", headers=HTMX)

    assert "Two runs and a swim." in latest and "Three easy runs." not in latest and "2 / 2" in latest
    assert f'href="/chat/{session.pk}/?answer={earlier.pk}#exchange-{message.pk}"' in latest
    html = paged.content.decode()
    assert "Three easy runs." in html and "Two runs and a swim." not in html and "1 / 2" in html
    assert "An earlier answer: your coach goes on from the latest one." in html
    assert f'href="/chat/{session.pk}/#exchange-{message.pk}" aria-label="Latest answer"' in html
    assert "Three easy runs." in client_of.get(f"/chat/{session.pk}/?answer={earlier.pk}").content.decode()


def test_a_page_asked_for_an_answer_that_is_not_this_exchanges_shows_the_latest(
    client_of: Client, user: User, other_user: User
) -> None:
    session = make_session(user, "Plan my week", "Three easy runs.")
    theirs = make_session(other_user, "Private", "Private answer.")
    their_reply = Message.objects.get(session=theirs, role="assistant")
    Message.objects.filter(pk=their_reply.pk).update(status="replaced")

    for answer in (str(their_reply.pk), "nonsense", ""):
        html = client_of.get(f"/chat/{session.pk}/?answer={answer}").content.decode()
        assert "Three easy runs." in html and "Private answer." not in html


def test_a_memory_an_earlier_answer_saved_is_shown_with_its_undo_while_the_new_one_is_written(
    client_of: Client, user: User
) -> None:
    session = make_session(user, "I'm giving a talk in June", "Good luck.")
    message = last_message(session)
    talk = make_memory(user, "talk", summary="Giving a talk in June")
    Memory.objects.filter(pk=talk.pk).update(message_id=message.pk)

    html = regenerate(client_of, message).content.decode()

    assert f'Saved to memory: Giving a talk in June · <a href="/memories/{talk.pk}/">View</a>' in html
    assert f'form="undo-memory-{talk.pk}">Undo</button>' in html
    assert f'action="/memories/{talk.pk}/delete"' in html


def test_while_an_answer_anew_is_written_a_memory_it_touched_is_left_to_its_stream(
    client_of: Client, user: User
) -> None:
    session = make_session(user, "I'm giving a talk in June", "Good luck.")
    message = last_message(session)
    regenerate(client_of, message)
    talk = make_memory(user, "talk", summary="Giving a talk in June", updated_at=timezone.now() + timedelta(seconds=1))
    Memory.objects.filter(pk=talk.pk).update(message_id=message.pk)

    html = client_of.get(f"/chat/{session.pk}/").content.decode()

    assert "Giving a talk in June" not in html, "the stream replays its cue: shown once"
