"""The look-back in a real chat turn over ASGI: the exchange embedded once the reply is out,
the model's search_conversations call answered with the person's past words, and the quiet
cue under the reply, in the stream and on a page loaded afterwards."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from django.test import Client

from accounts.memory_setting import user_memory_set
from accounts.models import User
from coach.look_back import conversations_search, exchanges_index
from coach.models import ChatSession, ConversationEmbedding, Message
from coach.services import session_start
from offline_coach import ModelServer
from tests.coach.factories import make_session
from tests.coach.test_turn import ask, stream, wait_for

KNEE = ("My left knee clicks on the stairs", "Then we skip lunges for now and do step-ups instead.")


@pytest.fixture
def person(live_app: str, user: User, client: Client) -> Client:
    client.force_login(user)
    return client


def earlier_conversation(user: User) -> ChatSession:
    session = make_session(user, *KNEE)
    moment = datetime(2026, 5, 3, 9, 0, tzinfo=UTC)
    ChatSession.objects.filter(pk=session.pk).update(created_at=moment)
    Message.objects.filter(session=session).update(created_at=moment)
    exchanges_index(user_id=user.pk)
    return session


def test_a_saved_reply_has_its_exchange_embedded_once_the_reply_is_out(
    live_app: str, person: Client, user: User, model_server: ModelServer, celery_eager: None
) -> None:
    model_server.queue_text("Step-ups it is.")
    message = ask(session_start(user=user), "Can we skip lunges this week")

    received = stream(live_app, person, message)

    assert received[-1][0] == "done"
    wait_for(lambda: ConversationEmbedding.objects.filter(message=message).exists())
    paths = [request.path for request in model_server.requests]
    # The words came first; the embedding after them, off the way to the first word.
    assert paths.index("/v1/embeddings") > paths.index("/v1/chat/completions")
    # Compared by the person's own words: they say enough alone.
    assert model_server.embedding_requests()[-1]["input"] == ["Can we skip lunges this week"]


def test_an_embedding_outage_after_the_reply_leaves_the_exchange_unindexed_not_the_turn_failed(
    live_app: str, person: Client, user: User, model_server: ModelServer, celery_eager: None
) -> None:
    model_server.queue_text("Step-ups it is.")
    model_server.queue_embedding_error(503)
    message = ask(session_start(user=user), "Can we skip lunges this week")

    received = stream(live_app, person, message)

    assert received[-1][0] == "done"
    wait_for(lambda: len(model_server.embedding_requests()) == 1)
    message.refresh_from_db()
    assert message.status == "answered"
    assert not ConversationEmbedding.objects.filter(message=message).exists()
    assert exchanges_index(user_id=user.pk) == 1


def test_the_coach_looks_back_and_the_person_sees_where_in_the_stream_and_after_a_reload(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    earlier = earlier_conversation(user)
    model_server.queue_tool_calls([("search_conversations", {"query": "knee clicks stairs", "limit": None})])
    model_server.queue_text("You told me in May your knee clicks on the stairs: step-ups, then.")
    message = ask(session_start(user=user), "Do you remember what I said about my knee?")

    received = stream(live_app, person, message)

    tool_result = json.loads(model_server.chat_requests()[-1]["messages"][-1]["content"])
    assert tool_result["status"] == "found"
    assert f"The person: {KNEE[0]}" in tool_result["text"]
    assert f"You (the coach): {KNEE[1]}" in tool_result["text"]
    cues = [data for name, data in received if name == "memory"]
    assert cues == [
        {
            "action": "looked_back",
            "conversations": [{"session_id": earlier.pk, "date": "3 May", "url": f"/chat/{earlier.pk}/"}],
        }
    ]
    page = person.get(f"/chat/{message.session_id}/").content.decode()
    assert "Looked back at: your conversation of" in page
    assert f'<a href="/chat/{earlier.pk}/">Open</a>' in page
    exchange = person.get(f"/chat/{message.session_id}/messages/{message.pk}/").content.decode()
    assert f'<a href="/chat/{earlier.pk}/">Open</a>' in exchange


def test_a_deleted_conversation_leaves_no_cue_and_nothing_to_find(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    earlier = earlier_conversation(user)
    model_server.queue_tool_calls([("search_conversations", {"query": "knee clicks stairs", "limit": None})])
    model_server.queue_text("Step-ups, then.")
    message = ask(session_start(user=user), "Do you remember what I said about my knee?")
    stream(live_app, person, message)

    ChatSession.objects.filter(pk=earlier.pk).delete()

    page = person.get(f"/chat/{message.session_id}/").content.decode()
    assert "Looked back at" not in page
    assert not ConversationEmbedding.objects.filter(session_id=earlier.pk).exists()


def test_a_conversation_that_is_not_remembered_offers_no_look_back(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    earlier_conversation(user)
    model_server.queue_text("Hello.")
    message = ask(session_start(user=user, remembered=False), "Do you remember what I said about my knee?")

    stream(live_app, person, message)

    assert model_server.chat_requests()[0].get("tools") is None


def test_the_offline_coach_looks_back_when_asked_and_answers_from_what_it_finds(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    earlier_conversation(user)
    message = ask(session_start(user=user), "Do you remember what I said about my knee clicks on the stairs?")

    received = stream(live_app, person, message)

    words = "".join(data["text"] for name, data in received if name == "text")
    assert f'On 3 May you told me: "{KNEE[0]}"' in words
    assert [data["action"] for name, data in received if name == "memory"] == ["looked_back"]


def test_what_was_said_while_memory_was_off_is_never_found_once_it_is_back_on(
    live_app: str, person: Client, user: User, model_server: ModelServer, celery_eager: None
) -> None:
    session = session_start(user=user)
    user_memory_set(user=user, enabled=False)
    model_server.queue_text("I hear you.")
    message = ask(session, "Between us: my knee clicks on the stairs")
    stream(live_app, person, message)
    user_memory_set(user=user, enabled=True)

    assert exchanges_index(user_id=user.pk) == 0
    assert model_server.embedding_requests() == []
    assert conversations_search(user=user, query="knee clicks stairs", limit=5, current_session_id=None) == []
