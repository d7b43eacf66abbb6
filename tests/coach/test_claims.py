"""The claim on answering a message, as a token: each attempt holds it with its own, every
step that finishes a turn acts only while that token holds, and the sweep fails an attempt
whose process is gone, keeping the words it had streamed."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models.functions import Now
from django.utils import timezone

from accounts.models import User
from coach import claims, streams
from coach.claims import (
    TURN_START_SECONDS,
    Attempt,
    ReplyTokens,
    TurnLost,
    message_retry,
    reply_fail,
    reply_of,
    reply_save,
    reply_stop,
    turn_begin,
    turn_claim,
    turn_heartbeat,
    turns_sweep,
)
from coach.liveness import this_process
from coach.models import ChatSession, Message
from coach.services import message_post, session_start
from infra.redis import redis_sync
from tests.coach.factories import make_session
from tests.emails.factories import make_email
from tests.infra.rows import field_values, stored_values
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db


def posted(user: User, text: str = "Plan my week") -> Message:
    return message_post(session=session_start(user=user), text=text, client_id=None)


def claimed(message: Message, user: User) -> Attempt:
    attempt = turn_claim(message_id=message.pk, user_id=user.pk, now=timezone.now())
    assert attempt is not None
    return attempt


def row(message: Message) -> Message:
    return Message.objects.get(pk=message.pk)


def replies(message: Message) -> list[tuple[str, str]]:
    return list(Message.objects.filter(reply_to=message).order_by("pk").values_list("status", "content"))


def silent_for(message: Message, seconds: float) -> None:
    """Its last heartbeat, `seconds` ago by the database's clock."""
    Message.objects.filter(pk=message.pk).update(heartbeat_at=Now() - timedelta(seconds=seconds))


def stream_events(message: Message) -> list[tuple[str, str]]:
    return [(fields["kind"], fields["data"]) for _, fields in redis_sync().xrange(streams.reply_key(message.pk))]


def written(attempt: Attempt, *pieces: str) -> None:
    """The attempt's words in the reply's stream, as its turn writes them."""

    async def write() -> None:
        await streams.attempt_begin(attempt.message_id, attempt.stream_holder)
        for piece in pieces:
            await streams.words_append(attempt.message_id, streams.TEXT, {"text": piece}, attempt=attempt.stream_holder)

    asyncio.run(write())


# The claim ----------------------------------------------------------------------------------


def test_a_claim_takes_the_waiting_message_with_a_token_of_its_own(user: User) -> None:
    message = posted(user)
    now = timezone.now()

    attempt = turn_claim(message_id=message.pk, user_id=user.pk, now=now)

    stored = row(message)
    assert attempt == Attempt(message_id=message.pk, session_id=message.session_id, token=stored.attempt)
    assert (stored.status, stored.claimed_at, stored.claimed_by) == ("answering", now, this_process())
    assert stored.heartbeat_at is not None


def test_a_turn_reads_its_message_conversation_and_person_as_the_orm_reads_them(user: User) -> None:
    user.time_zone = "Europe/Lisbon"
    user.save()
    session = make_session(user, "My knee hurts after runs", "Let's look at that.")
    ChatSession.objects.filter(pk=session.pk).update(summary="We talked about knees")
    message = message_post(session=session, text="Plan my week, gently: ¿qué tal? 🏃", client_id=None)

    begun = turn_begin(user_id=user.pk, message_id=message.pk, now=timezone.now())

    assert field_values(begun.message) == stored_values(begun.message)
    assert field_values(begun.message.session) == stored_values(begun.message.session)
    assert field_values(begun.user) == stored_values(user) and begun.user.time_zone == "Europe/Lisbon"
    assert begun.message.content == "Plan my week, gently: ¿qué tal? 🏃"
    assert not begun.message._state.adding and begun.message._state.db == "default"


def test_the_claim_leaves_a_message_that_is_not_waiting_or_not_theirs(user: User, other_user: User) -> None:
    message = posted(user)
    now = timezone.now()

    assert turn_claim(message_id=message.pk, user_id=other_user.pk, now=now) is None
    assert turn_claim(message_id=message.pk, user_id=user.pk, now=now) is not None
    assert turn_claim(message_id=message.pk, user_id=user.pk, now=now) is None
    assert turn_claim(message_id=message.pk + 1000, user_id=user.pk, now=now) is None
    assert row(message).status == Message.Status.ANSWERING


def test_each_attempt_at_a_message_holds_it_with_a_new_token(user: User) -> None:
    message = posted(user)
    first = claimed(message, user)
    assert reply_fail(attempt=first, error="the model is away")

    assert message_retry(message=row(message))
    second = claimed(message, user)

    assert first.token != second.token and row(message).attempt == second.token


def test_a_retry_waits_from_when_it_was_asked_for_not_from_when_the_message_was_written(user: User) -> None:
    message = posted(user)
    Message.objects.filter(pk=message.pk).update(
        status="failed", created_at=timezone.now() - timedelta(days=3), waiting_since=timezone.now() - timedelta(days=3)
    )

    assert message_retry(message=row(message))
    turns_sweep(silent_seconds=0)

    assert row(message).status == Message.Status.PENDING
    assert row(message).waiting_since > timezone.now() - timedelta(minutes=1)


# Finishing steps act only for the attempt that holds the message ----------------------------


def test_a_saved_reply_answers_its_message_with_what_it_cost(user: User) -> None:
    message = posted(user)
    attempt = claimed(message, user)
    later = timezone.now() + timedelta(minutes=1)

    reply = reply_save(attempt=attempt, text="Three **short** runs.", tokens=ReplyTokens(120, 30, True), now=later)

    assert (reply.role, reply.status, reply.reply_to_id, reply.created_at) == (
        "assistant",
        "complete",
        message.pk,
        later,
    )
    assert (reply.prompt_tokens, reply.completion_tokens, reply.tokens_estimated) == (120, 30, True)
    assert row(message).status == Message.Status.ANSWERED
    session = ChatSession.objects.get(pk=message.session_id)
    assert session.last_message_at == later
    assert reply_of(attempt=attempt) == reply


def test_a_reply_is_stored_encrypted(user: User) -> None:
    message = posted(user)
    reply = reply_save(attempt=claimed(message, user), text="Three short runs.")

    with connection.cursor() as cursor:
        cursor.execute("SELECT content FROM coach_message WHERE id = %s", [reply.pk])
        (stored,) = cursor.fetchone()
    assert "Three" not in stored and stored.startswith("gAAAA")


def test_a_dead_attempts_late_reply_leaves_the_live_retrys_answer_alone(user: User) -> None:
    message = posted(user)
    dead = claimed(message, user)
    silent_for(message, 60)
    assert turns_sweep(silent_seconds=10) == 1
    assert message_retry(message=row(message))
    live = claimed(message, user)

    with pytest.raises(TurnLost):
        reply_save(attempt=dead, text="The dead attempt's late words")
    assert reply_of(attempt=dead) is None
    reply_save(attempt=live, text="The retry's answer")

    assert row(message).status == Message.Status.ANSWERED
    assert replies(message) == [("complete", "The retry's answer")]


def test_a_dead_attempts_late_failure_leaves_the_live_retry_running(user: User) -> None:
    message = posted(user)
    dead = claimed(message, user)
    silent_for(message, 60)
    turns_sweep(silent_seconds=10)
    message_retry(message=row(message))
    live = claimed(message, user)

    assert not reply_fail(attempt=dead, error="the model is away", partial_text="half a reply")
    assert not reply_stop(attempt=dead, partial_text="half a reply")
    assert not turn_heartbeat(attempt=dead)

    assert row(message).status == Message.Status.ANSWERING and row(message).attempt == live.token
    assert replies(message) == []
    assert turn_heartbeat(attempt=live)


def test_a_stop_keeps_what_was_written_and_answers_the_message(user: User) -> None:
    message = posted(user)

    assert reply_stop(attempt=claimed(message, user), partial_text="Three short ")

    assert row(message).status == Message.Status.ANSWERED
    assert replies(message) == [("stopped", "Three short")]


# A turn begins ------------------------------------------------------------------------------


def test_a_turn_begins_with_its_message_conversation_person_and_history(user: User) -> None:
    session = make_session(user, "My knee hurts after runs", "Let's look at that.")
    message = message_post(session=session, text="Plan my week", client_id=None)

    begun = turn_begin(user_id=user.pk, message_id=message.pk, now=timezone.now())

    assert begun is not None
    assert begun.user.pk == user.pk and begun.message.session.pk == session.pk
    assert begun.attempt.token == row(message).attempt
    assert [m["content"] for m in begun.conversation.messages[1:]] == [
        "My knee hurts after runs",
        "Let's look at that.",
        "Plan my week",
    ]


def test_a_turn_reads_the_newest_messages_before_it_and_none_after(user: User) -> None:
    session = make_session(user, *[f"Line {number}" for number in range(60)])
    message = message_post(session=session, text="Now", client_id=None)
    message_post(session=session, text="Later", client_id=None, now=timezone.now() + timedelta(minutes=2))

    begun = turn_begin(user_id=user.pk, message_id=message.pk, now=timezone.now())

    said = [m["content"] for m in begun.conversation.messages[1:]]
    assert said[-1] == "Now" and "Later" not in said
    # Past its 40 messages the history drops its oldest quarter at once.
    assert said[:-1] == [f"Line {number}" for number in range(30, 60)]


def test_a_turn_reads_the_persons_memories_and_the_emails_lately_sent(user: User) -> None:
    make_memory(user, "knee", summary="Sore left knee", category="injury", source="user")
    make_email(
        user, period_key="w1", status="sent", subject="Easy week", body="Hi,\n\nRest that knee.", sent_at=timezone.now()
    )

    begun = turn_begin(user_id=user.pk, message_id=posted(user).pk, now=timezone.now())

    system = begun.conversation.messages[0]["content"]
    assert "Sore left knee" in system and "Rest that knee." in system


@pytest.mark.parametrize("off", ["memory", "conversation"])
def test_a_turn_that_does_not_use_memory_reads_no_memories_or_emails(user: User, off: str) -> None:
    make_memory(user, "knee", summary="Sore left knee", category="injury", source="user")
    make_email(user, period_key="w1", status="sent", subject="Easy week", body="Hi,\n\nRest.", sent_at=timezone.now())
    session = session_start(user=user)
    if off == "memory":
        User.objects.filter(pk=user.pk).update(memory_enabled=False)
    else:
        ChatSession.objects.filter(pk=session.pk).update(remembered=False)
    message = message_post(session=session, text="Plan my week", client_id=None)
    statements: list[str] = []

    def seen(execute, sql, params, many, context):
        statements.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(seen):
        begun = turn_begin(user_id=user.pk, message_id=message.pk, now=timezone.now())

    assert not begun.conversation.remembers
    assert not any("memory_memory" in sql or "emails_email" in sql for sql in statements)


# The sweep ----------------------------------------------------------------------------------


def test_an_attempt_whose_heartbeat_stopped_is_failed_keeping_the_words_it_streamed(user: User) -> None:
    message = posted(user)
    attempt = claimed(message, user)
    written(attempt, "Monday: an easy run. ", "Tuesday: ")
    silent_for(message, 30)

    assert turns_sweep(silent_seconds=10) == 1

    assert row(message).status == Message.Status.FAILED
    assert replies(message) == [("interrupted", "Monday: an easy run. Tuesday: ")]
    assert stream_events(message)[-1][0] == streams.FAILED


def test_an_attempt_that_beats_is_left_to_run(user: User) -> None:
    message = posted(user)
    attempt = claimed(message, user)
    silent_for(message, 30)
    assert turn_heartbeat(attempt=attempt)

    assert turns_sweep(silent_seconds=10) == 0
    assert row(message).status == Message.Status.ANSWERING


def test_without_a_judgement_of_silence_only_the_deadline_and_known_deaths_end_an_attempt(user: User) -> None:
    message = posted(user)
    claimed(message, user)
    silent_for(message, 3600)

    # The caller could not tell a silent turn from a database that was away.
    assert turns_sweep(silent_seconds=None) == 0
    assert row(message).status == Message.Status.ANSWERING


def test_an_attempt_past_its_deadline_and_grace_is_failed_whatever_its_heartbeat(user: User, settings) -> None:
    message = posted(user)
    claimed(message, user)
    overdue = timezone.now() - timedelta(seconds=settings.COACH_TURN_DEADLINE_SECONDS + claims.TURN_GRACE_SECONDS + 1)
    Message.objects.filter(pk=message.pk).update(claimed_at=overdue)

    assert turns_sweep(silent_seconds=None) == 1


def test_an_attempt_of_a_process_gone_from_this_host_is_failed_at_once(user: User) -> None:
    message = posted(user)
    claimed(message, user)
    gone = subprocess.Popen(["true"])
    gone.wait()
    Message.objects.filter(pk=message.pk).update(claimed_by=f"{socket.gethostname()}:{gone.pid}:a1b2c3")

    assert turns_sweep(silent_seconds=None) == 1
    assert row(message).status == Message.Status.FAILED


def test_an_attempt_of_an_earlier_process_with_this_very_pid_is_failed_at_once(user: User) -> None:
    # A container's first process has the same pid at every start.
    message = posted(user)
    claimed(message, user)
    Message.objects.filter(pk=message.pk).update(claimed_by=f"{socket.gethostname()}:{os.getpid()}:earlier")

    assert turns_sweep(silent_seconds=None) == 1


def test_an_attempt_of_a_live_process_or_of_another_host_waits_for_its_heartbeat(user: User) -> None:
    mine, elsewhere = posted(user), posted(user, "Plan my month")
    claimed(mine, user)
    claimed(elsewhere, user)
    Message.objects.filter(pk=elsewhere.pk).update(claimed_by="another-host:1:a1b2c3")

    assert turns_sweep(silent_seconds=None) == 0


def test_an_attempt_that_beats_while_it_is_being_swept_is_spared(user: User, monkeypatch) -> None:
    message = posted(user)
    attempt = claimed(message, user)
    silent_for(message, 30)

    def beat_meanwhile(message_id: int) -> str:
        assert turn_heartbeat(attempt=attempt)
        return ""

    monkeypatch.setattr(streams, "words_so_far", beat_meanwhile)

    assert turns_sweep(silent_seconds=10) == 0
    assert row(message).status == Message.Status.ANSWERING


def test_a_message_no_turn_took_in_time_is_failed_and_a_fresh_one_is_not(user: User) -> None:
    stale, fresh = posted(user), posted(user, "Plan my month")
    Message.objects.filter(pk=stale.pk).update(waiting_since=timezone.now() - timedelta(seconds=TURN_START_SECONDS + 1))

    assert turns_sweep(silent_seconds=None) == 1

    assert (row(stale).status, row(stale).error) == ("failed", "no turn started for it")
    assert row(fresh).status == Message.Status.PENDING


def test_a_swept_attempt_writes_its_stream_no_more_once_retried(user: User) -> None:
    message = posted(user)
    dead = claimed(message, user)
    written(dead, "Monday: ")
    silent_for(message, 30)
    turns_sweep(silent_seconds=10)
    message_retry(message=row(message))
    streams.reply_forget(message.pk)

    with pytest.raises(streams.NotHeld):
        asyncio.run(streams.words_append(message.pk, streams.TEXT, {"text": "late"}, attempt=dead.stream_holder))
    live = claimed(message, user)
    written(live, "Tuesday")

    assert [kind for kind, _ in stream_events(message)] == [streams.TEXT]
    assert '"Tuesday"' in stream_events(message)[0][1]
