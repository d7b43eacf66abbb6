"""A person's message posted once, however often it is sent, to their own conversation
and within their limit of turns at once; and a reply's reader finding that message."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import User
from coach.claims import reply_save, turn_claim
from coach.models import ChatSession, Message
from coach.selectors import message_to_follow, running_turns_of, session_to_write_in
from coach.services import TooManyTurns, message_post, message_post_as, session_start

pytestmark = pytest.mark.django_db


def test_a_message_reopens_its_conversation_in_one_transaction_after_its_lock(
    user: User, django_assert_num_queries
) -> None:
    session = session_start(user=user)
    ChatSession.objects.filter(pk=session.pk).update(ended_at=timezone.now(), summarised_at=timezone.now())
    now = timezone.now() + timedelta(minutes=1)

    # The savepoint, the lock on the person's turns, the conversation's lock (with their
    # running turns), the message with the conversation's new state (and the lookup of
    # what may have been sent already), the release.
    with django_assert_num_queries(5):
        message = message_post(session=session, text="Back again: my knee is better", client_id=None, now=now)

    assert Message.objects.get(pk=message.pk).content == "Back again: my knee is better"
    assert (message.content, message.status, message.created_at) == ("Back again: my knee is better", "pending", now)
    assert message.waiting_since == now
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

    assert found is not None and found.pk == first.pk
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
    attempt = turn_claim(message_id=message.pk, user_id=user.pk, now=timezone.now())
    reply = reply_save(attempt=attempt, text="Three short runs.")

    found = message_to_follow(user=user, session_pk=session.pk, message_pk=message.pk)

    assert (found.pk, found.session_id, found.status) == (message.pk, session.pk, Message.Status.ANSWERED)
    assert found.get_deferred_fields() >= {"content"}
    assert message_to_follow(user=other_user, session_pk=session.pk, message_pk=message.pk) is None
    assert message_to_follow(user=user, session_pk=session.pk + 1, message_pk=message.pk) is None
    assert message_to_follow(user=user, session_pk=session.pk, message_pk=reply.pk) is None


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


def test_posting_a_message_leaves_the_conversations_kept_prompt_unread(user: User) -> None:
    from django.db import transaction

    from coach.statements import session_locked

    session = session_start(user=user)
    ChatSession.objects.filter(pk=session.pk).update(prompt="A kept prompt, long and encrypted.")

    with transaction.atomic():
        locked = session_locked(user_id=user.pk, session_id=session.pk)

    assert locked is not None and "prompt" in locked.get_deferred_fields()
    assert locked.running_turns == 0
