"""The turn's claim and its reply's save, each one statement: they read and write exactly
what the ORM would, and keep their promises when the turn no longer holds its message."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from accounts.models import User
from coach.communication import sent_emails_for
from coach.models import ChatSession, Message
from coach.selectors import message_to_follow, running_turns_of, session_to_write_in
from coach.services import (
    ReplyTokens,
    TooManyTurns,
    TurnLost,
    message_post,
    message_post_as,
    reply_save,
    session_start,
    turn_begin,
    turn_claim,
)
from coach.statements import message_claim
from memory.selectors import memories_for_prompt
from tests.coach.factories import make_session
from tests.emails.factories import make_email
from tests.infra.rows import field_values, stored_values
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db


def test_the_claim_reads_the_message_its_conversation_and_its_person_as_the_orm_does(user: User) -> None:
    user.time_zone = "Europe/Lisbon"
    user.save()
    session = make_session(user, "My knee hurts after runs", "Let's look at that.")
    ChatSession.objects.filter(pk=session.pk).update(summary="We talked about knees")
    message = message_post(session=session, text="Plan my week, gently: ¿qué tal? 🏃", client_id=None)
    now = timezone.now()

    claimed = turn_claim(message_id=message.pk, user_id=user.pk, now=now)

    assert claimed is not None
    assert claimed.content == "Plan my week, gently: ¿qué tal? 🏃"
    assert claimed.status == Message.Status.ANSWERING
    assert claimed.claimed_at == now
    assert field_values(claimed) == stored_values(claimed)
    assert field_values(claimed.session) == stored_values(claimed.session)
    assert (claimed.session.title, claimed.session.summary) == ("My knee hurts after runs", "We talked about knees")
    assert field_values(claimed.session.user) == stored_values(user)
    assert claimed.session.user.time_zone == "Europe/Lisbon"
    assert not claimed._state.adding and claimed._state.db == "default"


def test_the_claim_leaves_a_message_that_is_not_waiting_or_not_theirs(user: User, other_user: User) -> None:
    message = message_post(session=session_start(user=user), text="Plan my week", client_id=None)

    assert turn_claim(message_id=message.pk, user_id=other_user.pk) is None
    assert turn_claim(message_id=message.pk, user_id=user.pk) is not None
    assert turn_claim(message_id=message.pk, user_id=user.pk) is None
    assert turn_claim(message_id=message.pk + 1000, user_id=user.pk) is None
    assert Message.objects.get(pk=message.pk).status == Message.Status.ANSWERING


def test_a_claim_costs_one_statement_and_a_saved_reply_one_more(user: User, django_assert_num_queries) -> None:
    message = message_post(session=session_start(user=user), text="Plan my week", client_id=None)

    with django_assert_num_queries(1):
        claimed = turn_claim(message_id=message.pk, user_id=user.pk)
    with django_assert_num_queries(1):
        reply_save(message=claimed, text="Three short runs.")


def test_a_saved_reply_is_stored_as_the_orm_stores_it_and_answers_its_message(user: User) -> None:
    session = session_start(user=user)
    message = message_post(session=session, text="Plan my week", client_id=None)
    claimed = turn_claim(message_id=message.pk, user_id=user.pk)
    later = timezone.now() + timedelta(minutes=1)

    reply = reply_save(
        message=claimed, text="Three **short** runs.", tokens=ReplyTokens(120, 30, estimated=True), now=later
    )

    assert field_values(reply) == stored_values(reply)
    assert (reply.role, reply.status, reply.reply_to_id) == ("assistant", "complete", message.pk)
    assert (reply.content, reply.created_at) == ("Three **short** runs.", later)
    assert (reply.prompt_tokens, reply.completion_tokens, reply.tokens_estimated) == (120, 30, True)
    assert (reply.client_id, reply.claimed_at, reply.error) == (None, None, "")
    assert Message.objects.get(pk=message.pk).status == Message.Status.ANSWERED
    session.refresh_from_db()
    assert session.last_message_at == later and session.updated_at == later


def test_a_reply_is_stored_encrypted(user: User) -> None:
    message = message_post(session=session_start(user=user), text="Plan my week", client_id=None)
    reply = reply_save(message=turn_claim(message_id=message.pk, user_id=user.pk), text="Three short runs.")

    with connection.cursor() as cursor:
        cursor.execute("SELECT content FROM coach_message WHERE id = %s", [reply.pk])
        (stored,) = cursor.fetchone()
    assert "Three" not in stored and stored.startswith("gAAAA")


def test_a_reply_to_a_message_no_longer_held_changes_nothing(user: User) -> None:
    session = session_start(user=user)
    message = message_post(session=session, text="Plan my week", client_id=None)
    claimed = turn_claim(message_id=message.pk, user_id=user.pk)
    # The sweeper failed the turn meanwhile.
    Message.objects.filter(pk=message.pk).update(status=Message.Status.FAILED)
    session.refresh_from_db()
    before = field_values(session)

    with pytest.raises(TurnLost):
        reply_save(message=claimed, text="Too late", now=timezone.now() + timedelta(minutes=5))

    assert not Message.objects.filter(reply_to=message).exists()
    assert Message.objects.get(pk=message.pk).status == Message.Status.FAILED
    assert stored_values(session) == before


def test_a_turn_begins_with_its_message_conversation_and_person(user: User) -> None:
    session = make_session(user, "My knee hurts after runs", "Let's look at that.")
    message = message_post(session=session, text="Plan my week", client_id=None)

    begun = turn_begin(user_id=user.pk, message_id=message.pk, now=timezone.now())

    assert begun is not None
    person, claimed, conversation = begun
    assert person.pk == user.pk and claimed.session.pk == session.pk
    assert [m["content"] for m in conversation.messages[1:]] == [
        "My knee hurts after runs",
        "Let's look at that.",
        "Plan my week",
    ]


def test_a_message_and_its_conversations_new_state_are_one_statement(user: User, django_assert_num_queries) -> None:
    session = session_start(user=user)
    ChatSession.objects.filter(pk=session.pk).update(ended_at=timezone.now(), summarised_at=timezone.now())
    now = timezone.now() + timedelta(minutes=1)

    # The savepoint, the lock, the message with the conversation's new state (and the
    # lookup of what may have been sent already), the release.
    with django_assert_num_queries(4):
        message = message_post(session=session, text="Back again: my knee is better", client_id=None, now=now)

    assert field_values(message) == stored_values(message)
    assert (message.content, message.status, message.created_at) == ("Back again: my knee is better", "pending", now)
    session.refresh_from_db()
    assert session.title == "Back again: my knee is better"
    assert (session.last_message_at, session.ended_at, session.summarised_at) == (now, None, None)
    assert session.updated_at >= now - timedelta(minutes=1)


def test_the_conversation_written_in_is_read_with_the_persons_running_turns(user: User, other_user: User) -> None:
    first, second = session_start(user=user), session_start(user=user)
    message_post(session=first, text="One", client_id=None)
    message_post(session=second, text="Two", client_id=None)
    answered = message_post(session=second, text="Three", client_id=None, now=timezone.now() + timedelta(minutes=2))
    Message.objects.filter(pk=answered.pk).update(status=Message.Status.ANSWERED)
    message_post(session=session_start(user=other_user), text="Not theirs", client_id=None)

    found = session_to_write_in(user=user, pk=first.pk)

    assert found is not None and field_values(found) == stored_values(found)
    assert found.running_turns == running_turns_of(user=user) == 2
    assert session_to_write_in(user=other_user, pk=first.pk) is None


def test_a_message_is_refused_in_another_persons_conversation_or_past_the_running_turns(
    user: User, other_user: User
) -> None:
    session = session_start(user=user)
    message_post(session=session, text="One", client_id=None)
    message_post(session=session_start(user=user), text="Two", client_id=None)

    with pytest.raises(ChatSession.DoesNotExist):
        message_post_as(user_id=other_user.pk, session_id=session.pk, text="Mine now", client_id=None)
    with pytest.raises(TooManyTurns):
        message_post_as(user_id=user.pk, session_id=session.pk, text="Three", client_id=None, turns_at_most=2)
    sent = message_post_as(user_id=user.pk, session_id=session.pk, text="Three", client_id=None, turns_at_most=3)

    assert sent.session.running_turns == 2 and sent.session.user_id == user.pk
    assert [m.content for m in session.messages.order_by("pk")] == ["One", "Three"]


def test_a_submission_sent_again_is_found_by_its_client_id_before_any_newer_message(user: User) -> None:
    session = session_start(user=user)
    submitted = uuid.uuid4()
    now = timezone.now()
    first = message_post(session=session, text="Plan my week", client_id=submitted, now=now)
    # Newer, and inside the window of the same words sent again: the client id still wins.
    message_post(session=session, text="And my diet", client_id=uuid.uuid4(), now=now + timedelta(seconds=5))

    again = message_post(session=session, text="Plan my week", client_id=submitted, now=now + timedelta(seconds=10))

    assert again.pk == first.pk
    assert Message.objects.filter(session=session).count() == 2


def test_a_reader_finds_only_their_own_message_and_reads_no_text(user: User, other_user: User) -> None:
    session = session_start(user=user)
    message = message_post(session=session, text="Plan my week", client_id=None)
    reply = reply_save(message=turn_claim(message_id=message.pk, user_id=user.pk), text="Three short runs.")

    found = message_to_follow(user=user, session_pk=session.pk, message_pk=message.pk)

    assert (found.pk, found.session_id, found.status) == (message.pk, session.pk, Message.Status.ANSWERED)
    assert found.get_deferred_fields() >= {"content"}
    assert message_to_follow(user=other_user, session_pk=session.pk, message_pk=message.pk) is None
    assert message_to_follow(user=user, session_pk=session.pk + 1, message_pk=message.pk) is None
    assert message_to_follow(user=user, session_pk=session.pk, message_pk=reply.pk) is None


def test_the_claim_brings_the_newest_messages_before_it_as_the_orm_reads_them(user: User, other_user: User) -> None:
    session = make_session(user, *[f"Line {number}" for number in range(8)])
    # A failed reply and a part-reply are history the turn leaves out, but read all the same.
    line_5 = session.messages.order_by("pk")[5]
    Message.objects.filter(pk=line_5.pk).update(status=Message.Status.FAILED)
    make_session(other_user, "Not theirs", "Nor this")
    message = message_post(session=session, text="Now", client_id=None)
    message_post(session=session, text="Later", client_id=None, now=timezone.now() + timedelta(minutes=2))
    expected = [field_values(m) for m in Message.objects.filter(session=session, pk__lt=message.pk).order_by("-pk")[:5]]

    claim = message_claim(message_id=message.pk, user_id=user.pk, now=timezone.now(), history=5)

    assert claim.message.pk == message.pk and claim.message.session.user.pk == user.pk
    assert [field_values(m) for m in claim.history] == expected
    assert [m.content for m in claim.history] == [f"Line {number}" for number in range(7, 2, -1)]
    assert claim.memories is None


def test_a_claim_of_the_first_message_has_no_history_and_a_lost_claim_reads_none(user: User) -> None:
    message = message_post(session=session_start(user=user), text="Hello", client_id=None)

    claim = message_claim(message_id=message.pk, user_id=user.pk, now=timezone.now(), history=40, memories=True)
    assert claim is not None and claim.history == [] and claim.memories == []
    assert message_claim(message_id=message.pk, user_id=user.pk, now=timezone.now(), history=40) is None


def test_the_claim_brings_the_persons_memories_as_the_prompt_reads_them(user: User, other_user: User) -> None:
    now = timezone.now()
    # Two changed at the same moment: the tie-break decides their order.
    for n, minutes_ago in enumerate([50, 10, 40, 10, 30]):
        make_memory(user, f"note-{n}", summary=f"Note {n}", updated_at=now - timedelta(minutes=minutes_ago))
    make_memory(other_user, "not-theirs", summary="Someone else's note")
    message = message_post(session=session_start(user=user), text="Plan my week", client_id=None)
    expected = [stored_values(memory) for memory in memories_for_prompt(user=user)]

    claim = message_claim(message_id=message.pk, user_id=user.pk, now=timezone.now(), history=40, memories=True)

    assert all(memory.get_deferred_fields() == {"embedding"} for memory in claim.memories)
    read = [{**field_values(memory), "embedding": None} for memory in claim.memories]
    assert len(read) == 5 and read == [{**memory, "embedding": None} for memory in expected]
    # Newest change first; of two changed together, the later made.
    assert [memory.key for memory in claim.memories] == ["note-3", "note-1", "note-4", "note-2", "note-0"]


def test_the_claim_brings_the_emails_lately_sent_as_the_prompt_reads_them(user: User, other_user: User) -> None:
    now = timezone.now()
    # More than the prompt quotes, two sent at the same moment, one not sent, one not theirs.
    for n, days_ago in enumerate([9, 3, 3, 1, 5, 7]):
        body = f"Hi Ada,\n\nEmail {n} says hello."
        make_email(
            user,
            period_key=f"e{n}",
            status="sent",
            subject=f"Email {n}",
            body=body,
            sent_at=now - timedelta(days=days_ago),
        )
    make_email(user, period_key="queued", subject="Not sent yet", body="Hi Ada,\n\nNot yet.")
    make_email(other_user, period_key="theirs", status="sent", subject="Not theirs", body="Hi,\n\nNo.", sent_at=now)
    message = message_post(session=session_start(user=user), text="Plan my week", client_id=None)

    claim = message_claim(message_id=message.pk, user_id=user.pk, now=timezone.now(), history=40, memories=True)

    assert claim.sent_emails == list(sent_emails_for(user))
    assert [email.subject for email in claim.sent_emails] == ["Email 3", "Email 2", "Email 1", "Email 4", "Email 5"]


def rows_read(claim: Callable[[], object]) -> tuple[object, list[int]]:
    """What `claim` returns, and how many rows each of its statements read."""
    counts = []

    def counted(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        counts.append(context["cursor"].rowcount)
        return result

    with connection.execute_wrapper(counted):
        return claim(), counts


@pytest.mark.parametrize("off", ["nothing", "memory", "conversation"])
def test_the_claim_reads_no_memories_or_emails_for_a_turn_that_does_not_use_them(user: User, off: str) -> None:
    make_memory(user, "knee", summary="Sore left knee", category="injury", source="user")
    make_email(user, period_key="w1", status="sent", subject="Easy week", body="Hi,\n\nRest.", sent_at=timezone.now())
    session = session_start(user=user)
    if off == "memory":
        User.objects.filter(pk=user.pk).update(memory_enabled=False)
    elif off == "conversation":
        ChatSession.objects.filter(pk=session.pk).update(remembered=False)
    message = message_post(session=session, text="Plan my week", client_id=None)

    claim, counts = rows_read(
        lambda: message_claim(message_id=message.pk, user_id=user.pk, now=timezone.now(), history=40, memories=True)
    )

    if off == "nothing":
        # The claimed message, the memory and the email.
        assert counts == [3] and len(claim.memories) == len(claim.sent_emails) == 1
    else:
        # The claimed message alone: not even read.
        assert counts == [1] and claim.memories is None and claim.sent_emails is None


def test_a_turn_begins_in_one_statement_its_claim(
    transactional_db: None, user: User, django_assert_num_queries
) -> None:
    session = make_session(user, "My knee hurts after runs", "Let's look at that.")
    message = message_post(session=session, text="Plan my week", client_id=None)
    make_memory(user, "knee", summary="Sore left knee", category="injury", source="user")
    make_email(
        user, period_key="w1", status="sent", subject="Easy week", body="Hi,\n\nRest that knee.", sent_at=timezone.now()
    )

    # Outside a test's transaction, as in production: the claim, with the history, the
    # memories and the emails lately sent; and the transaction's BEGIN and COMMIT.
    with django_assert_num_queries(3) as captured:
        begun = turn_begin(user_id=user.pk, message_id=message.pk, now=timezone.now())

    assert [query["sql"].split()[0] for query in captured.captured_queries] == ["BEGIN", "WITH", "COMMIT"]
    system = begun[2].messages[0]["content"]
    assert "Sore left knee" in system and "Rest that knee." in system


@pytest.mark.parametrize("same_client_id", [True, False])
def test_a_message_sent_again_is_not_added_and_leaves_its_conversation_as_it_was(
    user: User, same_client_id: bool, django_assert_num_queries
) -> None:
    # Again from the same page (its client id), or the same words from another tab while
    # the first are unanswered: the first comes back, and the conversation's times stay.
    session = session_start(user=user)
    first_id = uuid.uuid4()
    sent_at = timezone.now()
    first = message_post(session=session, text="Plan my week", client_id=first_id, now=sent_at)

    again = message_post(
        session=session,
        text="Plan my week",
        client_id=first_id if same_client_id else uuid.uuid4(),
        now=sent_at + timedelta(seconds=5),
    )

    assert again.pk == first.pk
    with django_assert_num_queries(0):
        assert again.session.pk == session.pk
    assert session.messages.count() == 1
    session.refresh_from_db()
    assert session.last_message_at == sent_at
