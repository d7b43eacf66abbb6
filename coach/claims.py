"""The claim on answering a person's message: taken by one attempt, kept alive, given up.

Each attempt at an answer (the first, each retry) claims the message with a token of its
own. Every step that finishes a turn (the reply saved, a failure, a stop, the sweep) acts
only while that token still holds, so a dead attempt's late step changes nothing: not a
retry's reply, not its failure. A running attempt beats (turn_heartbeat) every
COACH_TURN_HEARTBEAT_SECONDS; the sweep fails, retryable, an attempt whose process is gone or
whose heartbeat stopped, keeping the words it had streamed as a cut-off part-reply.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction
from django.db.models import DurationField, ExpressionWrapper, F, QuerySet
from django.db.models.functions import Now
from django.utils import timezone
from redis import RedisError

from coach import streams
from coach.conversation import HISTORY_MAX_MESSAGES, Conversation
from coach.liveness import known_dead, this_process
from coach.models import ChatSession, Message
from coach.prompting import conversation_for_turn
from coach.services import TooManyTurns
from coach.statements import message_claimed, messages_before, reply_add_if_held, session_locked

if TYPE_CHECKING:
    from accounts.models import User

logger = logging.getLogger(__name__)

# What the person is told when a turn failed.
FAILED_RETRYABLE = "Your coach couldn't answer just now. Your message is saved: try again in a moment."
FAILED_FOR_GOOD = "Your coach couldn't answer this message. It is saved; if trying again fails too, we are on it."
FAILED_TOO_SLOW = "Your coach took too long to answer. Your message is saved: try again in a moment."
REACHED_LENGTH = "This reply reached its length limit. Your coach can go on from where it stopped, or start again."
# What the model is asked, after its part-reply, when the person has it go on.
GO_ON = (
    "(Your last reply stopped at its length limit, mid-way. Go on from exactly where it stopped: "
    "do not repeat any of it and do not start again.)"
)
# Past its deadline a turn ends itself; the sweep leaves it this much longer to say so.
TURN_GRACE_SECONDS = 30
# A message no turn took this long after it began waiting never will (its web process
# died before starting one, and no reader started one since).
TURN_START_SECONDS = 60
# A read of the running turns that took this long met a database that was away.
SLOW_READ_SECONDS = 1.0

Status = Message.Status


class TurnLost(Exception):
    """A turn tried to finish a message its attempt no longer holds (swept, or retried)."""


@dataclass(frozen=True)
class Attempt:
    """One attempt at answering a message: what its finishing steps need."""

    message_id: int
    session_id: int
    token: uuid.UUID
    # The part-reply (stopped at its length limit) this attempt goes on from, if it does:
    # its words open this attempt's reply, and it goes when the attempt finishes.
    continues: Message | None = None

    @property
    def stream_holder(self) -> str:
        return self.token.hex


@dataclass(frozen=True)
class BegunTurn:
    user: User
    message: Message
    conversation: Conversation
    attempt: Attempt


@dataclass(frozen=True)
class ReplyTokens:
    """What a reply's turn cost, summed over its model rounds; `estimated` when the server
    sent no counts and they were worked out from the text."""

    prompt: int
    completion: int
    estimated: bool
    # Of the prompt's, those the provider read from its cache (None: it did not say).
    cached: int | None = None


def turn_claim(*, message_id: int, user_id: int, now: datetime) -> Attempt | None:
    """Take the person's waiting message for a new attempt at answering it, with a token
    of its own. None if it is not theirs, not waiting, or another attempt has it: of any
    number of claims at once (two tabs, two processes, a reload), one matches."""
    token = uuid.uuid4()
    message = message_claimed(message_id=message_id, user_id=user_id, token=token, now=now, by=this_process())
    return None if message is None else Attempt(message_id=message.pk, session_id=message.session_id, token=token)


def turn_begin(*, user_id: int, message_id: int, now: datetime) -> BegunTurn | None:
    """Claim the person's message and assemble what the model is sent, in one transaction:
    a claim whose conversation could not be assembled is not left standing. None when the
    message is not theirs, not waiting, or another attempt has it."""
    token = uuid.uuid4()
    with transaction.atomic():
        # The claim reads the message back with its conversation and its person.
        message = message_claimed(message_id=message_id, user_id=user_id, token=token, now=now, by=this_process())
        if message is None:
            return None
        # One more than the history holds: a history past its limit drops a step.
        earlier = messages_before(
            message=message, limit=HISTORY_MAX_MESSAGES + 1, from_id=message.session.history_from_id
        )
        user = message.session.user
        conversation = conversation_for_turn(user=user, message=message, now=now, earlier=earlier[::-1])
        continues = _part_reply_to_go_on_from(message)
    if continues is not None:
        conversation.messages.extend(
            [{"role": "assistant", "content": continues.content}, {"role": "user", "content": GO_ON}]
        )
    attempt = Attempt(message_id=message.pk, session_id=message.session_id, token=token, continues=continues)
    return BegunTurn(user=user, message=message, conversation=conversation, attempt=attempt)


def _part_reply_to_go_on_from(message: Message) -> Message | None:
    if message.continues_reply_id is None:
        return None
    replies = Message.objects.filter(reply_to_id=message.pk, status=Status.LIMITED)
    return replies.filter(pk=message.continues_reply_id).first()


def turn_heartbeat(*, attempt: Attempt) -> bool:
    """The attempt is alive: recorded, if it still holds its message. Whether it does. By
    the database's clock, as the sweep judges it: web processes' clocks may differ."""
    return _held(attempt).update(heartbeat_at=Now()) == 1


def attempt_under_way(attempt: Attempt) -> bool:
    """Asked inside a memory write's transaction (memory.tool_context): whether the attempt
    still holds its message, whose row stays locked until that transaction ends. So the
    attempt's end (the reply saved, a failure, a stop, the sweep) waits for a write under
    way, and a write that comes after the end is refused."""
    return _held(attempt).select_for_update(no_key=True).exists()


def reply_save(
    *, attempt: Attempt, text: str, tokens: ReplyTokens | None = None, now: datetime | None = None
) -> Message:
    """The whole reply, with what it cost; the message it answers is answered. TurnLost if
    the attempt no longer holds the message (swept, or retried meanwhile)."""
    now = now or timezone.now()
    reply = _reply(attempt, text=text, status=Status.COMPLETE, now=now, tokens=tokens)
    # One statement, in no transaction of its own, unless a part-reply goes with it.
    with transaction.atomic() if attempt.continues is not None else contextlib.nullcontext():
        saved = reply_add_if_held(
            message_id=attempt.message_id, session_id=attempt.session_id, token=attempt.token, reply=reply, now=now
        )
        if saved is None:
            raise TurnLost(f"message {attempt.message_id} is no longer held by this attempt")
        _part_reply_replaced(attempt)
    return saved


def reply_of(*, attempt: Attempt) -> Message | None:
    """The whole reply this attempt saved, if it did (and still holds the answer)."""
    if not Message.objects.filter(pk=attempt.message_id, status=Status.ANSWERED, attempt=attempt.token).exists():
        return None
    replies = Message.objects.filter(reply_to_id=attempt.message_id, status=Status.COMPLETE)
    return replies.order_by("-pk").first()


def reply_fail(
    *, attempt: Attempt, error: str, partial_text: str = "", now: datetime | None = None, limited: bool = False
) -> bool:
    """The attempt failed: the message is kept (to retry), with any part of the reply,
    marked interrupted so it is never taken for a whole one, or `limited` when the model
    stopped it at its length limit (the person may have it go on). Whether the attempt
    still held the message (a late failure of a dead attempt changes nothing)."""
    now = now or timezone.now()
    with transaction.atomic():
        failed = _held(attempt).update(status=Status.FAILED, error=error, continues_reply_id=None)
        if failed:
            _part_reply_replaced(attempt)
        if failed and partial_text.strip():
            status = Status.LIMITED if limited else Status.INTERRUPTED
            _reply_create(attempt, text=partial_text, status=status, now=now)
    return bool(failed)


def turn_not_begun(*, message_id: int, error: str) -> bool:
    """A turn could not even claim and prepare the message (its claim was undone): the
    message is failed, retryable, unless another attempt took it meanwhile."""
    return Message.objects.filter(pk=message_id, status=Status.PENDING).update(status=Status.FAILED, error=error) == 1


def reply_stop(*, attempt: Attempt, partial_text: str, now: datetime | None = None) -> bool:
    """The person stopped the reply: what was written so far is kept, marked stopped, and
    their message counts as answered (they may simply ask again). Whether the attempt
    still held the message."""
    now = now or timezone.now()
    with transaction.atomic():
        answered = _held(attempt).update(status=Status.ANSWERED, error="", continues_reply_id=None)
        if answered:
            _part_reply_replaced(attempt)
        if answered and partial_text.strip():
            _reply_create(attempt, text=partial_text.strip(), status=Status.STOPPED, now=now)
            ChatSession.objects.filter(pk=attempt.session_id).update(last_message_at=now, updated_at=now)
    return bool(answered)


def message_retry(*, message: Message, turns_at_most: int | None = None, now: datetime | None = None) -> bool:
    """Ask again for a reply to a failed message. The message itself is not sent twice; a
    part-reply of the failed attempt is dropped, since a new one replaces it. It waits
    from now: the sweep judges the retry by when it was asked for. TooManyTurns when
    `turns_at_most` of the person's messages are already being answered: a retry spends
    the model like a new message, so it counts against the same limit."""
    with transaction.atomic():
        _refuse_if_busy(message, turns_at_most)
        reset = Message.objects.filter(pk=message.pk, status=Status.FAILED).update(
            status=Status.PENDING,
            error="",
            claimed_at=None,
            waiting_since=now or timezone.now(),
            continues_reply_id=None,
        )
        if reset:
            Message.objects.filter(reply_to=message, status__in=[Status.INTERRUPTED, Status.LIMITED]).delete()
    return reset == 1


def message_continue(*, message: Message, turns_at_most: int | None = None, now: datetime | None = None) -> bool:
    """Have the coach go on from a reply it stopped at its length limit: a new attempt, whose
    reply opens with the words so far. False (nothing done) unless the message failed so.
    TooManyTurns as for message_retry."""
    with transaction.atomic():
        _refuse_if_busy(message, turns_at_most)
        limited = Message.objects.filter(reply_to=message, status=Status.LIMITED).order_by("-pk").first()
        if limited is None:
            return False
        reset = Message.objects.filter(pk=message.pk, status=Status.FAILED).update(
            status=Status.PENDING,
            error="",
            claimed_at=None,
            waiting_since=now or timezone.now(),
            continues_reply_id=limited.pk,
        )
    return reset == 1


def _refuse_if_busy(message: Message, turns_at_most: int | None) -> None:
    # Counted with the conversation locked, as message_post_as counts a new message, so
    # retries sent at once cannot all slip under the limit.
    if turns_at_most is None:
        return
    session = session_locked(user_id=message.session.user_id, session_id=message.session_id)
    if session is not None and session.running_turns >= turns_at_most:
        raise TooManyTurns(session.running_turns)


@dataclass(frozen=True)
class _Running:
    pk: int
    session_id: int
    attempt: uuid.UUID | None
    claimed_by: str
    claimed_at: datetime | None
    heartbeat_at: datetime | None
    # How long since its last heartbeat, by the database's clock.
    silent: timedelta | None


def turns_sweep(*, now: datetime | None = None, silent_seconds: float | None = None) -> int:
    """End every attempt whose process died, failed and retryable, the words it streamed
    kept as a cut-off part-reply, and every message no turn took in TURN_START_SECONDS.

    An attempt is dead when the process it names is known gone (on this host), when its
    heartbeat is older than `silent_seconds` by the database's clock (None: the caller
    cannot tell a silent turn from a database that was away, so heartbeats are not judged),
    or when it passed its deadline by TURN_GRACE_SECONDS (a turn ends itself at its
    deadline). Returns how many were ended."""
    now = now or timezone.now()
    overdue = now - timedelta(seconds=settings.COACH_TURN_DEADLINE_SECONDS + TURN_GRACE_SECONDS)
    rows = Message.objects.filter(status=Status.ANSWERING).annotate(
        silent=ExpressionWrapper(Now() - F("heartbeat_at"), output_field=DurationField())
    )
    read_from = time.monotonic()
    running = [
        _Running(*row)
        for row in rows.values_list("pk", "session_id", "attempt", "claimed_by", "claimed_at", "heartbeat_at", "silent")
    ]
    if time.monotonic() - read_from > SLOW_READ_SECONDS:
        # The database was away (frozen) until just now: the turns' own heartbeats were
        # held up with this read, so their silence says nothing yet.
        silent_seconds = None
    silent = None if silent_seconds is None else timedelta(seconds=silent_seconds)
    ended = sum(_sweep_one(turn, now=now) for turn in running if _is_dead(turn, overdue, silent))
    never_started = Message.objects.filter(
        role=Message.Role.USER,
        status=Status.PENDING,
        waiting_since__lt=now - timedelta(seconds=TURN_START_SECONDS),
    ).update(status=Status.FAILED, error="no turn started for it")
    return ended + never_started


def _is_dead(turn: _Running, overdue: datetime, silent: timedelta | None) -> bool:
    if turn.claimed_at is None or turn.claimed_at < overdue:
        return True
    if silent is not None and turn.silent is not None and turn.silent > silent:
        return True
    return known_dead(turn.claimed_by)


def _sweep_one(turn: _Running, *, now: datetime) -> bool:
    try:
        partial = streams.words_so_far(turn.pk)
    except RedisError:
        # The words are lost with the stream; the failure is recorded all the same.
        partial = ""
    with transaction.atomic():
        # Only if nothing moved since it was read: a turn that beat meanwhile lives on.
        failed = Message.objects.filter(
            pk=turn.pk, status=Status.ANSWERING, attempt=turn.attempt, heartbeat_at=turn.heartbeat_at
        ).update(status=Status.FAILED, error="the turn stopped with its process", continues_reply_id=None)
        if failed and partial.strip() and turn.attempt is not None:
            attempt = Attempt(message_id=turn.pk, session_id=turn.session_id, token=turn.attempt)
            # The words so far open with those of a part-reply it went on from, if any.
            Message.objects.filter(reply_to_id=turn.pk, status=Status.LIMITED).delete()
            _reply_create(attempt, text=partial, status=Status.INTERRUPTED, now=now)
    if failed and turn.attempt is not None:
        logger.warning("message %s: its turn's process is gone; failed, retryable", turn.pk)
        # Without Redis, its readers learn it from the database, which they ask while quiet.
        with contextlib.suppress(RedisError):
            streams.reply_end_for(turn.pk, turn.attempt.hex, streams.FAILED, {"message": FAILED_RETRYABLE})
    return bool(failed)


def _part_reply_replaced(attempt: Attempt) -> None:
    """The part-reply an attempt went on from goes when the attempt ends: its words are in
    the attempt's own reply (whole, stopped, cut off or limited again)."""
    if attempt.continues is not None:
        Message.objects.filter(pk=attempt.continues.pk, status=Status.LIMITED).delete()
        Message.objects.filter(pk=attempt.message_id).update(continues_reply_id=None)


def _held(attempt: Attempt) -> QuerySet[Message]:
    return Message.objects.filter(pk=attempt.message_id, status=Status.ANSWERING, attempt=attempt.token)


def _reply_create(
    attempt: Attempt, *, text: str, status: str, now: datetime, tokens: ReplyTokens | None = None
) -> Message:
    reply = _reply(attempt, text=text, status=status, now=now, tokens=tokens)
    reply.save(force_insert=True)
    return reply


def _reply(attempt: Attempt, *, text: str, status: str, now: datetime, tokens: ReplyTokens | None = None) -> Message:
    return Message(
        session_id=attempt.session_id,
        role=Message.Role.ASSISTANT,
        content=text,
        status=status,
        reply_to_id=attempt.message_id,
        created_at=now,
        prompt_tokens=tokens.prompt if tokens else None,
        cached_prompt_tokens=tokens.cached if tokens else None,
        completion_tokens=tokens.completion if tokens else None,
        tokens_estimated=tokens.estimated if tokens else False,
    )
