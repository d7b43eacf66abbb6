"""The person's last message answered anew (coach/answer_anew.py): Regenerate keeps the
answer as an earlier one, Edit puts new words in place of the old and drops what answered
them; what the earlier answers saved to memory stays; every refusal says why and changes
nothing."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.db import connection
from django.utils import timezone

from accounts.models import User
from coach import exchange_index, streams
from coach.answer_anew import (
    CHANGED_ELSEWHERE,
    ENDED,
    NOT_LAST,
    STILL_ANSWERING,
    AnswerAnewRefused,
    message_edit,
    message_regenerate,
)
from coach.claims import reply_fail, reply_save, reply_stop, turn_claim
from coach.exchange_index import exchange_keep_out, exchanges_index
from coach.models import ChatSession, ConversationEmbedding, LookBack, Message
from coach.services import MessageRejected, TooManyTurns, message_post, session_end, session_start
from infra.encryption import decrypt
from infra.redis import redis_sync
from memory.models import Memory
from tests.coach.factories import make_session
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db

Status = Message.Status


def answered(user: User, text: str = "Plan my week", reply: str = "Three easy runs.") -> Message:
    """A conversation whose one message was answered by a turn (claimed, then replied)."""
    message = message_post(session=session_start(user=user), text=text, client_id=None)
    answer(message, user, reply)
    return Message.objects.get(pk=message.pk)


def answer(message: Message, user: User, text: str) -> Message:
    attempt = turn_claim(message_id=message.pk, user_id=user.pk, now=timezone.now())
    assert attempt is not None
    return reply_save(attempt=attempt, text=text)


def regenerate(message: Message, user: User, **kwargs) -> bool:
    return message_regenerate(
        user_id=user.pk, session_id=message.session_id, message_id=message.pk, asked_at=message.waiting_since, **kwargs
    )


def edit(message: Message, user: User, text: str, **kwargs) -> bool:
    return message_edit(
        user_id=user.pk,
        session_id=message.session_id,
        message_id=message.pk,
        text=text,
        asked_at=message.waiting_since,
        **kwargs,
    )


def replies(message: Message) -> list[tuple[str, str]]:
    return list(Message.objects.filter(reply_to=message).order_by("pk").values_list("status", "content"))


def test_regenerate_keeps_the_answer_as_an_earlier_one_and_waits_for_a_new_one(user: User) -> None:
    message = answered(user)

    assert regenerate(message, user)

    fresh = Message.objects.get(pk=message.pk)
    assert fresh.status == Status.PENDING and fresh.attempt is None and fresh.waiting_since > message.waiting_since
    assert fresh.content == "Plan my week"
    assert replies(message) == [(Status.REPLACED, "Three easy runs.")]
    answer(fresh, user, "Two runs and a swim.")
    assert replies(message) == [(Status.REPLACED, "Three easy runs."), (Status.COMPLETE, "Two runs and a swim.")]


def test_regenerate_keeps_a_stopped_answer_and_drops_a_cut_off_one(user: User) -> None:
    stopped = message_post(session=session_start(user=user), text="Plan my week", client_id=None)
    attempt = turn_claim(message_id=stopped.pk, user_id=user.pk, now=timezone.now())
    reply_stop(attempt=attempt, partial_text="Monday: an easy")
    cut = message_post(session=session_start(user=user), text="Plan my month", client_id=None)
    attempt = turn_claim(message_id=cut.pk, user_id=user.pk, now=timezone.now())
    reply_fail(attempt=attempt, error="the model is away", partial_text="Week one:")

    assert regenerate(Message.objects.get(pk=stopped.pk), user)
    assert regenerate(Message.objects.get(pk=cut.pk), user)

    assert replies(stopped) == [(Status.REPLACED, "Monday: an easy")]
    assert replies(cut) == [], "a part-reply nobody was shown whole goes, as on a retry"


def test_an_edit_puts_the_new_words_in_place_and_every_answer_to_the_old_ones_goes(user: User) -> None:
    message = answered(user, text="My left knee hurts after runs")
    regenerate(message, user)
    answer(message, user, "Let's look at your cadence.")
    message = Message.objects.get(pk=message.pk)

    assert edit(message, user, "  My right knee hurts after runs  ")

    fresh = Message.objects.get(pk=message.pk)
    assert fresh.content == "My right knee hurts after runs" and fresh.status == Status.PENDING
    assert (fresh.pk, fresh.created_at) == (message.pk, message.created_at), "the same message, in its place"
    assert replies(message) == []
    session = ChatSession.objects.get(pk=message.session_id)
    assert session.title == "My right knee hurts after runs", "the title came from the earlier words"


def test_an_edit_leaves_the_earlier_words_in_no_row_of_the_database(user: User) -> None:
    message = answered(user, text="Training for the qzkumquat marathon", reply="The qzkumquat marathon, noted.")

    edit(message, user, "Training for the autumn half marathon")

    with connection.cursor() as cursor:
        cursor.execute("SELECT content FROM coach_message UNION ALL SELECT title FROM coach_chatsession")
        stored = [row[0] for row in cursor.fetchall()]

    assert stored and not any("qzkumquat" in decrypt(value) for value in stored if value)


def test_an_edit_of_a_later_message_leaves_the_title_of_the_first(user: User) -> None:
    session = make_session(user, "How do I start running again?", "Slowly.")
    later = message_post(session=session, text="And swimming?", client_id=None)
    answer(later, user, "Also slowly.")

    edit(Message.objects.get(pk=later.pk), user, "And cycling?")

    assert ChatSession.objects.get(pk=session.pk).title == "How do I start running again?"


def test_an_edit_with_the_words_unchanged_is_answered_again_and_keeps_the_answer(user: User) -> None:
    message = answered(user)

    assert edit(message, user, "Plan my week")

    assert replies(message) == [(Status.REPLACED, "Three easy runs.")]


def test_what_the_earlier_answers_saved_to_memory_stays(user: User) -> None:
    message = answered(user, text="I'm giving a talk in June")
    talk = make_memory(user, "talk", summary="Giving a talk in June")
    Memory.objects.filter(pk=talk.pk).update(message_id=message.pk, session_id=message.session_id)

    regenerate(message, user)
    answer(message, user, "Good luck.")
    edit(Message.objects.get(pk=message.pk), user, "I'm giving a talk in July")

    assert Memory.objects.filter(pk=talk.pk, message_id=message.pk).exists()


def test_the_earlier_answers_look_backs_and_vectors_go_but_a_row_keeping_it_out_stays(user: User) -> None:
    message = answered(user, text="What did I say about my knee last spring?")
    past = make_session(user, "My knee", "Rest it.")
    LookBack.objects.create(user=user, message=message, looked_at=past)
    exchanges_index(user_id=user.pk)
    assert ConversationEmbedding.objects.filter(message=message, embedding__isnull=False).exists()
    kept_out = answered(user, text="Between us")
    exchange_keep_out(user_id=user.pk, message_id=kept_out.pk)

    regenerate(message, user)
    regenerate(kept_out, user)

    assert not LookBack.objects.filter(message=message).exists()
    assert not ConversationEmbedding.objects.filter(message=message).exists()
    assert ConversationEmbedding.objects.filter(message=kept_out, embedding__isnull=True).exists()


def test_an_indexer_that_read_the_earlier_words_writes_no_vector_of_them(user: User, monkeypatch) -> None:
    message = answered(user, text="Training for the qzkumquat marathon this autumn")
    embed = exchange_index.llm.embed

    def edited_while_embedding(texts: list[str]):
        # The indexer read the exchange and waits on the embedding model, while the person
        # edits the message and it is answered anew.
        monkeypatch.setattr(exchange_index.llm, "embed", embed)
        edit(message, user, "Training for the half marathon this autumn")
        answer(message, user, "Good choice.")
        return embed(texts)

    monkeypatch.setattr(exchange_index.llm, "embed", edited_while_embedding)
    exchanges_index(user_id=user.pk)

    assert not ConversationEmbedding.objects.filter(message=message).exists()
    exchanges_index(user_id=user.pk)
    row = ConversationEmbedding.objects.get(message=message)
    assert list(row.embedding) == pytest.approx(embed(["Training for the half marathon this autumn"])[0].vector)


def test_the_earlier_answers_stream_goes_and_its_late_pieces_are_refused(user: User) -> None:
    message = answered(user)
    redis_sync().xadd(streams.reply_key(message.pk), {"kind": "text", "data": '{"text": "Three easy runs."}'})

    regenerate(message, user)

    assert not redis_sync().exists(streams.reply_key(message.pk))
    assert redis_sync().get(streams.holder_key(message.pk)) == streams.FORGOTTEN


@pytest.mark.parametrize("ask", ["regenerate", "edit"])
def test_a_message_still_being_answered_is_refused_and_nothing_changes(user: User, ask: str) -> None:
    message = message_post(session=session_start(user=user), text="Plan my week", client_id=None)
    turn_claim(message_id=message.pk, user_id=user.pk, now=timezone.now())

    with pytest.raises(AnswerAnewRefused, match=STILL_ANSWERING):
        regenerate(message, user) if ask == "regenerate" else edit(message, user, "Plan my month")

    fresh = Message.objects.get(pk=message.pk)
    assert (fresh.status, fresh.content) == (Status.ANSWERING, "Plan my week")


@pytest.mark.parametrize("ask", ["regenerate", "edit"])
def test_only_the_last_message_may_be_answered_anew(user: User, ask: str) -> None:
    session = make_session(user, "Plan my week", "Three runs.", "And next week?", "Four runs.")
    first = session.messages.filter(role="user").order_by("pk").first()

    with pytest.raises(AnswerAnewRefused, match=NOT_LAST):
        regenerate(first, user) if ask == "regenerate" else edit(first, user, "Plan my month")

    assert replies(first) == [(Status.COMPLETE, "Three runs.")]


def test_an_ended_conversation_is_not_answered_anew(user: User) -> None:
    message = answered(user)
    session_end(session=message.session)

    with pytest.raises(AnswerAnewRefused, match=ENDED):
        regenerate(message, user)
    with pytest.raises(AnswerAnewRefused, match=ENDED):
        edit(message, user, "Plan my month")

    assert replies(message) == [(Status.COMPLETE, "Three easy runs.")]


def test_another_persons_message_is_not_found(user: User, other_user: User) -> None:
    message = answered(user)

    with pytest.raises(Message.DoesNotExist):
        regenerate(message, other_user)
    with pytest.raises(Message.DoesNotExist):
        message_edit(
            user_id=other_user.pk, session_id=message.session_id, message_id=message.pk, text="x", asked_at=None
        )
    with pytest.raises(Message.DoesNotExist):
        message_regenerate(user_id=user.pk, session_id=message.session_id + 1, message_id=message.pk, asked_at=None)

    assert replies(message) == [(Status.COMPLETE, "Three easy runs.")]


@pytest.mark.parametrize(("text", "says"), [("   ", "the message is empty"), ("x" * 5000, "the most is 4,000")])
def test_an_edit_that_cannot_be_sent_says_why_and_keeps_the_words_there(user: User, text: str, says: str) -> None:
    message = answered(user)

    with pytest.raises(MessageRejected, match=says):
        edit(message, user, text)

    assert Message.objects.get(pk=message.pk).content == "Plan my week"
    assert replies(message) == [(Status.COMPLETE, "Three easy runs.")]


def test_answering_anew_counts_against_the_turns_at_once(user: User) -> None:
    message = answered(user)
    other = message_post(session=session_start(user=user), text="And my month?", client_id=None)

    with pytest.raises(TooManyTurns):
        regenerate(message, user, turns_at_most=1)

    assert Message.objects.get(pk=other.pk).status == Status.PENDING
    assert replies(message) == [(Status.COMPLETE, "Three easy runs.")]


def test_the_same_click_twice_answers_once(user: User) -> None:
    message = answered(user)

    assert regenerate(message, user) is True
    assert regenerate(message, user) is False, "the page's answer was replaced already"
    assert edit(message, user, "Plan my week") is False

    assert replies(message) == [(Status.REPLACED, "Three easy runs.")]


def test_an_edit_from_a_page_shown_before_another_answer_anew_is_refused_and_changes_nothing(user: User) -> None:
    message = answered(user)
    regenerate(message, user)
    answer(message, user, "Two runs and a swim.")

    with pytest.raises(AnswerAnewRefused, match=CHANGED_ELSEWHERE):
        edit(message, user, "Plan my month")

    assert Message.objects.get(pk=message.pk).content == "Plan my week"
    assert replies(message)[-1] == (Status.COMPLETE, "Two runs and a swim.")


@pytest.mark.django_db(transaction=True)
def test_two_asks_at_once_from_two_tabs_make_one_answer() -> None:
    from tests.conftest import make_user

    person = make_user(f"{uuid.uuid4().hex[:8]}@example.com")
    message = answered(person)
    start = threading.Barrier(2)
    asked: list[bool | Exception] = []

    def tab(ask) -> None:
        try:
            start.wait()
            asked.append(ask())
        except Exception as error:
            asked.append(error)
        finally:
            connection.close()

    tabs = [
        threading.Thread(target=tab, args=(lambda: regenerate(message, person),)),
        threading.Thread(target=tab, args=(lambda: edit(message, person, "Plan my month"),)),
    ]
    for thread in tabs:
        thread.start()
    for thread in tabs:
        thread.join(timeout=30)

    # One went through; the other found the answer it was shown replaced: nothing more.
    assert sorted(map(repr, asked)) in (
        sorted(["True", "False"]),
        sorted(["True", repr(AnswerAnewRefused(CHANGED_ELSEWHERE))]),
    )
    kinds = [status for status, _ in replies(message)]
    assert Message.objects.get(pk=message.pk).status == Status.PENDING
    assert kinds in ([Status.REPLACED], []), "one answer anew: kept as earlier, or gone with an edit"
