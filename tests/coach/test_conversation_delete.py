"""A person deletes one of their conversations: its messages, summary, embeddings, look-back
cues and Redis streams go; their memories stay; nobody else's conversation can be named."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.utils import timezone

from accounts.forgetting import conversation_delete_by_person
from accounts.models import User
from coach import streams
from coach.look_back import exchanges_index
from coach.models import ChatSession, ConversationEmbedding, LookBack, Message
from infra.redis import redis_sync
from memory.models import Memory
from offline_coach import ModelServer
from tests.coach.factories import make_session
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db


def stream_with(message_id: int, *events: tuple[str, dict]) -> None:
    client = redis_sync()
    for kind, data in events:
        client.xadd(streams.reply_key(message_id), {"kind": kind, "data": json.dumps(data)})


def cue_naming(session_id: int) -> dict:
    return {"action": "looked_back", "conversations": [{"session_id": session_id, "date": "3 May"}]}


@pytest.fixture
def person(client: Client, user: User) -> Client:
    client.force_login(user)
    return client


def test_deleting_a_conversation_takes_its_words_embeddings_and_look_backs_and_leaves_memories(
    user: User, model_server: ModelServer
) -> None:
    gone = make_session(user, "My knee clicks on the stairs", "Step-ups, then.")
    ChatSession.objects.filter(pk=gone.pk).update(summary="Talked about the knee", summarised_at=timezone.now())
    kept = make_session(user, "Do you remember my knee?", "Yes.")
    asking = kept.messages.get(role="user")
    exchanges_index(user_id=user.pk)
    LookBack.objects.create(user=user, message=asking, looked_at=gone)
    LookBack.objects.create(user=user, message=gone.messages.get(role="user"), looked_at=kept)
    memory = make_memory(user, key="knee", summary="Left knee clicks on stairs")
    Memory.objects.filter(pk=memory.pk).update(session_id=gone.pk)

    assert conversation_delete_by_person(user=user, session_id=gone.pk) is True

    assert not ChatSession.objects.filter(pk=gone.pk).exists()
    assert not Message.objects.filter(session_id=gone.pk).exists()
    assert set(ConversationEmbedding.objects.values_list("session_id", flat=True)) == {kept.pk}
    assert not LookBack.objects.exists()
    assert Memory.objects.filter(pk=memory.pk).exists()
    assert Message.objects.filter(session=kept).count() == 2


def test_its_replies_and_every_cue_naming_it_leave_redis(user: User) -> None:
    gone = make_session(user, "My knee clicks on the stairs", "Step-ups, then.")
    kept = make_session(user, "Do you remember my knee?", "Yes.", "And my talk?", "Practise it.")
    gone_message = gone.messages.get(role="user")
    asking, other = kept.messages.filter(role="user").order_by("pk")
    Message.objects.filter(pk__in=[asking.pk, other.pk, gone_message.pk]).update(claimed_at=timezone.now())
    stream_with(gone_message.pk, ("text", {"text": "Step-ups"}), ("done", {"html": "Step-ups"}))
    stream_with(asking.pk, ("memory", cue_naming(gone.pk)), ("text", {"text": "Yes."}))
    stream_with(other.pk, ("memory", cue_naming(kept.pk)), ("text", {"text": "Practise it."}))
    streams.session_announce(gone.pk, gone_message.pk)

    conversation_delete_by_person(user=user, session_id=gone.pk)

    client = redis_sync()
    assert not client.exists(streams.reply_key(gone_message.pk), streams.session_key(gone.pk))
    assert [fields["kind"] for _, fields in client.xrange(streams.reply_key(asking.pk))] == ["text"]
    assert [fields["kind"] for _, fields in client.xrange(streams.reply_key(other.pk))] == ["memory", "text"]


def test_another_persons_conversation_cannot_be_deleted(user: User, other_user: User) -> None:
    theirs = make_session(other_user, "Grace's words", "Reply to Grace")

    assert conversation_delete_by_person(user=user, session_id=theirs.pk) is False

    assert Message.objects.filter(session=theirs).count() == 2


def test_the_person_deletes_a_conversation_from_its_page_and_is_back_at_the_chat(person: Client, user: User) -> None:
    session = make_session(user, "Hello", "Hi!")

    response = person.post(f"/chat/{session.pk}/delete")

    assert response.status_code == 302 and response["Location"] == "/"
    assert not ChatSession.objects.filter(pk=session.pk).exists()


def test_an_htmx_delete_is_told_where_to_go(person: Client, user: User) -> None:
    session = make_session(user, "Hello", "Hi!")

    response = person.post(f"/chat/{session.pk}/delete", headers={"HX-Request": "true"})

    assert response.status_code == 200 and response["HX-Redirect"] == "/"


def test_the_page_offers_the_deletion_and_says_what_stays(person: Client, user: User) -> None:
    session = make_session(user, "Hello", "Hi!")

    page = person.get(f"/chat/{session.pk}/").content.decode()

    assert f'action="/chat/{session.pk}/delete"' in page
    assert "your coach can no longer look back at it" in page


def test_another_persons_conversation_is_a_404_and_stays(person: Client, other_user: User) -> None:
    theirs = make_session(other_user, "Grace's words", "Reply to Grace")

    assert person.post(f"/chat/{theirs.pk}/delete").status_code == 404
    assert ChatSession.objects.filter(pk=theirs.pk).exists()


def test_a_visitor_is_sent_to_log_in_and_a_get_is_refused(client: Client, user: User) -> None:
    session = make_session(user, "Hello", "Hi!")

    assert client.post(f"/chat/{session.pk}/delete").status_code == 302
    client.force_login(user)
    assert client.get(f"/chat/{session.pk}/delete").status_code == 405
    assert ChatSession.objects.filter(pk=session.pk).exists()
