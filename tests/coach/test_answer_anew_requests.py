"""What the model receives when the person's last message is answered anew (regenerated,
edited, or retried after a failure), read from the scripted model server: the request
begins, byte for byte, with the first answer's up to the message (the kept system prompt,
the same history); the replaced answer is in no request; what it saved to memory follows
the message as a note; and the next turn's request begins with the new answer's."""

from __future__ import annotations

import json
from typing import Any

import pytest

from accounts.memory_setting import user_memory_set
from accounts.models import User
from coach import streams
from coach.answer_anew import message_edit, message_regenerate
from coach.claims import message_retry
from coach.exchange_index import exchanges_index
from coach.models import ChatSession, ConversationEmbedding, Message
from coach.services import message_post, session_start
from coach.turn import turn_start
from infra.redis import redis_sync
from memory.models import Memory
from offline_coach import ModelServer
from tests.coach.factories import TALK_SAVE
from tests.forgetting import places_holding

pytestmark = pytest.mark.django_db(transaction=True)

TURN_SECONDS = 30
FIRST_ANSWER = "Good luck with the qzkumquat talk."


def answered(user: User, session: ChatSession, text: str) -> Message:
    message = message_post(session=session, text=text, client_id=None)
    turn_start(user_id=user.pk, message_id=message.pk).result(timeout=TURN_SECONDS)
    return Message.objects.get(pk=message.pk)


def regenerated(user: User, message: Message) -> None:
    """The message answered again, as the person's page asks, and the new answer's turn run."""
    assert message_regenerate(
        user_id=user.pk, session_id=message.session_id, message_id=message.pk, asked_at=message.waiting_since
    )
    answered_anew(user, message)


def answered_anew(user: User, message: Message) -> None:
    turn_start(user_id=user.pk, message_id=message.pk).result(timeout=TURN_SECONDS)


def wire(messages: list[dict[str, Any]]) -> str:
    return json.dumps(messages, ensure_ascii=False)


def conversation_with_a_saved_talk(user: User, model_server: ModelServer) -> tuple[Message, dict[str, Any]]:
    """A conversation of two exchanges, the second of which saved a memory: its message,
    and the first request of its turn."""
    session = session_start(user=user)
    model_server.queue_text("Hello! What are you working on?")
    answered(user, session, "Hello")
    model_server.queue_tool_calls([("save_memory", TALK_SAVE)])
    model_server.queue_text(FIRST_ANSWER)
    before = len(model_server.chat_requests())
    message = answered(user, session, "I'm giving a talk in June")
    assert Message.objects.get(reply_to=message).content == FIRST_ANSWER
    return message, model_server.chat_requests()[before]


def test_a_regenerated_answer_is_asked_for_with_the_first_answers_request_as_its_prefix(
    user: User, model_server: ModelServer
) -> None:
    message, first = conversation_with_a_saved_talk(user, model_server)

    model_server.queue_text("Break a leg in June.")
    before = len(model_server.chat_requests())
    regenerated(user, message)

    again = model_server.chat_requests()[before]
    sent, then = again["messages"][: len(first["messages"])], again["messages"][len(first["messages"]) :]
    assert wire(sent) == wire(first["messages"]), "byte for byte up to and with the message"
    assert again["tools"] == first["tools"]
    # After it, only the note of what the replaced answer saved: the memory stays.
    assert [m["role"] for m in then] == ["assistant", "tool"] and "Giving a talk in June" in then[1]["content"]
    assert "qzkumquat" not in wire(again["messages"]), "the replaced answer is not in the request"
    assert [m.summary for m in Memory.objects.filter(user=user, message_id=message.pk)] == ["Giving a talk in June"]
    assert [m.content for m in Message.objects.filter(reply_to=message).order_by("pk")] == [
        FIRST_ANSWER,
        "Break a leg in June.",
    ]

    # The next turn's request begins with the regenerated one's, and holds its answer only.
    model_server.queue_text("Fine.")
    before = len(model_server.chat_requests())
    answered(user, message.session, "What should I practise first?")
    following = model_server.chat_requests()[before]["messages"]
    assert wire(following[: len(again["messages"])]) == wire(again["messages"])
    assert {"role": "assistant", "content": "Break a leg in June."} in following
    assert "qzkumquat" not in wire(following)


def test_an_edited_message_is_asked_for_with_the_same_prefix_up_to_it_and_none_of_the_earlier_words(
    user: User, model_server: ModelServer
) -> None:
    message, first = conversation_with_a_saved_talk(user, model_server)

    model_server.queue_text("A talk in July: plenty of time.")
    before = len(model_server.chat_requests())
    assert message_edit(
        user_id=user.pk,
        session_id=message.session_id,
        message_id=message.pk,
        text="I'm giving a qzlantern talk in July",
        asked_at=message.waiting_since,
    )
    answered_anew(user, message)

    again = model_server.chat_requests()[before]["messages"]
    up_to = len(first["messages"]) - 1
    assert wire(again[:up_to]) == wire(first["messages"][:up_to]), "byte for byte up to the message"
    assert again[up_to] == {"role": "user", "content": "I'm giving a qzlantern talk in July"}
    assert [m["role"] for m in again[up_to + 1 :]] == ["assistant", "tool"], "the note of the memory saved before"
    assert "qzkumquat" not in wire(again) and 'talk in June"' not in wire(again[: up_to + 1])
    assert [m.content for m in Message.objects.filter(reply_to=message)] == ["A talk in July: plenty of time."]


def test_with_memory_off_an_answer_anew_is_asked_for_without_memory_and_without_the_replaced_answer(
    user: User, model_server: ModelServer
) -> None:
    message, _ = conversation_with_a_saved_talk(user, model_server)
    user_memory_set(user=user, enabled=False)

    model_server.queue_text("Good luck.")
    before = len(model_server.chat_requests())
    regenerated(user, message)

    again = model_server.chat_requests()[before]
    assert "tools" not in again
    assert "qzkumquat" not in wire(again["messages"]) and "Giving a talk in June" not in wire(again["messages"])
    assert [m.summary for m in Memory.objects.filter(user=user)] == ["Giving a talk in June"], "kept, unused while off"
    assert Message.objects.get(pk=message.pk).said_with_memory_off


def test_a_replaced_answer_is_kept_only_where_the_person_reads_it(user: User, model_server: ModelServer) -> None:
    session = session_start(user=user)
    model_server.queue_text("The qzkumquat qzlantern qzmarmot plan: three runs.")
    # Few words: the exchange is embedded with its answer, so the vector held the answer too.
    message = answered(user, session, "Plan my week")
    exchanges_index(user_id=user.pk)
    first = Message.objects.get(reply_to=message)
    assert ConversationEmbedding.objects.filter(message=message, reply=first).exists()
    assert redis_sync().exists(streams.reply_key(message.pk))

    model_server.queue_text("Two runs and a swim.")
    regenerated(user, message)
    exchanges_index(user_id=user.pk)

    # The page that pages back to it and the export read it; no model, search or vector does.
    assert sorted(places_holding("qzkumquat qzlantern qzmarmot", user, model_server=model_server)) == [
        "coach_message.content",
        "the export",
    ]


def test_a_retry_after_an_attempt_that_saved_a_memory_is_asked_for_with_the_first_attempts_request_as_its_prefix(
    user: User, model_server: ModelServer
) -> None:
    session = session_start(user=user)
    model_server.queue_text("Hello! What are you working on?")
    answered(user, session, "Hello")
    model_server.queue_tool_calls([("save_memory", TALK_SAVE)])
    model_server.queue_error(503)
    before = len(model_server.chat_requests())
    message = answered(user, session, "I'm giving a talk in June")
    assert message.status == Message.Status.FAILED
    first = model_server.chat_requests()[before]["messages"]

    model_server.queue_text("Good luck with the talk.")
    before = len(model_server.chat_requests())
    assert message_retry(message=message)
    answered_anew(user, message)

    again = model_server.chat_requests()[before]["messages"]
    assert wire(again[: len(first)]) == wire(first)
    assert [m["role"] for m in again[len(first) :]] == ["assistant", "tool"], (
        "what the failed attempt saved, after the message"
    )
