"""Chat writes: sessions, a person's messages (saved before any model call), the claim on
a turn, replies, and the sweep that ends turns whose process died.

A person's message is committed before the model is ever called, so whatever happens
to the model, what they wrote is kept. A reply is saved whole, or marked interrupted (cut
off) or stopped (by the person); the message it answers always ends answered or failed.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from coach.conversation import HISTORY_MAX_MESSAGES, Conversation, conversation_for_turn
from coach.models import TITLE_MAX_CHARS, UNANSWERED, ChatSession, Message
from coach.statements import message_add_unless_sent, message_claim, reply_add_if_held, session_locked

if TYPE_CHECKING:
    from accounts.models import User

# The same text sent again this soon, while the first is still unanswered, is one message
# sent twice (two clicks, two tabs), not two messages.
DUPLICATE_WINDOW_SECONDS = 60
# Past its deadline a turn ends itself; the sweeper leaves it this much longer to say so.
TURN_GRACE_SECONDS = 30
# A session's summary taken by a worker this long ago and still not written is handed out
# again (the summary task retries model outages for up to about ten minutes).
SUMMARY_LEASE_SECONDS = 15 * 60


class MessageRejected(Exception):
    """A message that cannot be sent; the text is shown to the person."""


class TooManyTurns(Exception):
    """A message refused while the person's other messages are still being answered."""


class _SentAlready(Exception):
    """Ends the transaction that added a message already sent, undoing the addition."""

    def __init__(self, message: Message) -> None:
        super().__init__(message.pk)
        self.message = message


class TurnLost(Exception):
    """A turn tried to finish a message it no longer holds (swept, or answered meanwhile)."""


def session_start(
    *,
    user: User,
    first_message: str | None = None,
    client_id: uuid.UUID | None = None,
    remembered: bool = True,
    now: datetime | None = None,
) -> ChatSession:
    """A new conversation with its first message (both or neither; an empty one only when
    no message is given at all, as the app's own code does). `remembered=False` starts one
    that is not remembered; while the person has memory off, every one is.

    Idempotent by `client_id`: the same submission twice (a double click, a retried
    request) is the conversation the first one started, not a second one."""
    now = now or timezone.now()
    if first_message is not None:
        _check_text(first_message)
    with transaction.atomic():
        # Serialises this person's new conversations, so two submissions cannot both start
        # one; and reads their memory setting as it stands now, not as the caller saw it.
        memory_enabled = (
            get_user_model()
            .objects.select_for_update()
            .filter(pk=user.pk)
            .values_list("memory_enabled", flat=True)
            .get()
        )
        if client_id is not None and (
            earlier := Message.objects.filter(session__user=user, client_id=client_id).select_related("session").first()
        ):
            return earlier.session
        session = ChatSession.objects.create(
            user=user, created_at=now, last_message_at=now, remembered=remembered and memory_enabled
        )
        if first_message is not None:
            message_post(session=session, text=first_message, client_id=client_id, now=now)
    return session


def message_post(
    *, session: ChatSession, text: str, client_id: uuid.UUID | None, now: datetime | None = None
) -> Message:
    """Store what the person wrote, once, before anything else happens."""
    return message_post_as(user_id=session.user_id, session_id=session.pk, text=text, client_id=client_id, now=now)


def message_post_as(
    *,
    user_id: int,
    session_id: int,
    text: str,
    client_id: uuid.UUID | None,
    turns_at_most: int | None = None,
    now: datetime | None = None,
) -> Message:
    """message_post, by the person with `user_id`, to their conversation `session_id`:
    ChatSession.DoesNotExist if it is not theirs, and TooManyTurns when `turns_at_most` of
    their messages are already waiting for, or getting, a reply."""
    now = now or timezone.now()
    text = _check_text(text)
    try:
        return _message_added(
            user_id=user_id, session_id=session_id, text=text, client_id=client_id, now=now, turns_at_most=turns_at_most
        )
    except _SentAlready as already:
        return already.message


def _message_added(
    *, user_id: int, session_id: int, text: str, client_id: uuid.UUID | None, now: datetime, turns_at_most: int | None
) -> Message:
    with transaction.atomic():
        # Serialises this session's submissions, so a double submit cannot slip through;
        # its owner and the person's running turns come with it.
        session = session_locked(user_id=user_id, session_id=session_id)
        if session is None:
            raise ChatSession.DoesNotExist(f"no conversation {session_id} of person {user_id}")
        if turns_at_most is not None and session.running_turns >= turns_at_most:
            raise TooManyTurns(session.running_turns)
        message = Message(
            session=session,
            role=Message.Role.USER,
            content=text,
            status=Message.Status.PENDING,
            client_id=client_id,
            created_at=now,
        )
        session.last_message_at = now
        if session.ended_at is not None:
            # Reopened: it is summarised again when it ends again, with what came after.
            session.ended_at, session.summarised_at, session.summary_claimed_at = None, None, None
        if not session.title:
            session.title = _title_from(text)
        # The message and the conversation's new state, in one statement that also reads
        # what the checks below need: the submission with this client id if there is one,
        # else the person's last message, if it came within the last minute. A statement
        # after the lock: one that waited on it sees what the other one saved.
        changed = ["last_message_at", "ended_at", "summarised_at", "summary_claimed_at", "title", "updated_at"]
        window_start = now - timedelta(seconds=DUPLICATE_WINDOW_SECONDS)
        added, found = message_add_unless_sent(
            message=message, session=session, session_fields=changed, since=window_start
        )
        if found is not None:
            found.session = session
        if not added:
            # The same submission again: it was not added.
            return found
        if found is not None and found.content == text and found.status in UNANSWERED:
            # The same words again while the first are unanswered (two tabs): taken back.
            raise _SentAlready(found)
    return message


def turn_claim(*, message_id: int, user_id: int, now: datetime | None = None) -> Message | None:
    """Take the right to answer the person's message: the message, read with its
    conversation and its person. Only one turn may run per message: a second start for it
    (a reload, another tab, another process) gets None, as does anyone else's message."""
    claim = message_claim(message_id=message_id, user_id=user_id, now=now or timezone.now())
    return None if claim is None else claim.message


def turn_begin(*, user_id: int, message_id: int, now: datetime) -> tuple[User, Message, Conversation] | None:
    """Claim the person's message and assemble what the model is sent, in one transaction:
    a claim whose conversation could not be assembled is not left standing. None when the
    message is not theirs, not waiting, or another turn has it."""
    with transaction.atomic():
        # The claim, and in the same statement all the turn reads: the message, the
        # conversation's last messages, the person's memories and the emails lately sent to
        # them. A turn that loses the claim (another tab's, another process's) reads nothing.
        claim = message_claim(
            message_id=message_id, user_id=user_id, now=now, history=HISTORY_MAX_MESSAGES, memories=True
        )
        if claim is None:
            return None
        message, user = claim.message, claim.message.session.user
        conversation = conversation_for_turn(
            user=user,
            message=message,
            now=now,
            earlier=claim.history[::-1],
            memories=claim.memories,
            sent_emails=claim.sent_emails,
        )
    return user, message, conversation


@dataclass(frozen=True)
class ReplyTokens:
    """What a reply's turn cost, summed over its model rounds; `estimated` when the server
    sent no counts and they were worked out from the text."""

    prompt: int
    completion: int
    estimated: bool


def reply_save(
    *, message: Message, text: str, tokens: ReplyTokens | None = None, now: datetime | None = None
) -> Message:
    """The whole reply, with what it cost; the message it answers is answered. Applies only
    while the turn still holds the message (a sweeper may have failed a turn that overran)."""
    now = now or timezone.now()
    reply = _reply(message, text=text, status=Message.Status.COMPLETE, now=now, tokens=tokens)
    saved = reply_add_if_held(message=message, reply=reply, now=now)
    if saved is None:
        raise TurnLost(f"message {message.pk} is no longer being answered by this turn")
    return saved


def reply_fail(*, message_id: int, error: str, partial_text: str = "", now: datetime | None = None) -> None:
    """The turn failed: keep the message (to retry), and any part of the reply, marked
    as interrupted so it is never taken for a whole one."""
    now = now or timezone.now()
    with transaction.atomic():
        message = Message.objects.filter(pk=message_id).first()
        failed = Message.objects.filter(
            pk=message_id, status__in=[Message.Status.PENDING, Message.Status.ANSWERING]
        ).update(status=Message.Status.FAILED, error=error)
        if message is not None and failed and partial_text.strip():
            _reply_create(message, text=partial_text, status=Message.Status.INTERRUPTED, now=now)


def message_retry(*, message: Message) -> bool:
    """Ask again for a reply to a failed message. The message itself is not sent twice;
    a part-reply from the failed attempt is dropped, since a new one replaces it."""
    with transaction.atomic():
        reset = Message.objects.filter(pk=message.pk, status=Message.Status.FAILED).update(
            status=Message.Status.PENDING, error="", claimed_at=None
        )
        if reset:
            Message.objects.filter(reply_to=message, status=Message.Status.INTERRUPTED).delete()
    return reset == 1


def reply_stop(*, message: Message, partial_text: str, now: datetime | None = None) -> Message | None:
    """The person stopped the reply: what was written so far is kept, marked stopped, and
    their message counts as answered (they may simply ask again)."""
    now = now or timezone.now()
    with transaction.atomic():
        answered = Message.objects.filter(pk=message.pk, status=Message.Status.ANSWERING).update(
            status=Message.Status.ANSWERED, error=""
        )
        if not answered or not partial_text.strip():
            return None
        reply = _reply_create(message, text=partial_text.strip(), status=Message.Status.STOPPED, now=now)
        ChatSession.objects.filter(pk=message.session_id).update(last_message_at=now, updated_at=now)
    return reply


def turns_sweep(*, now: datetime | None = None) -> int:
    """End every turn whose process died: failed and retryable, the message kept.

    A turn never runs past COACH_TURN_DEADLINE_SECONDS from its claim, so one still
    answering a grace period after that lost its process; a message still waiting that
    long after it was written never got a turn at all. Judged by the claim, so a retry of
    an old message is a fresh turn. Returns how many were ended."""
    now = now or timezone.now()
    overdue = now - timedelta(seconds=settings.COACH_TURN_DEADLINE_SECONDS + TURN_GRACE_SECONDS)
    stale_answering = Message.objects.filter(status=Message.Status.ANSWERING, claimed_at__lt=overdue).update(
        status=Message.Status.FAILED, error="the turn stopped with its process"
    )
    never_started = Message.objects.filter(
        role=Message.Role.USER, status=Message.Status.PENDING, created_at__lt=overdue
    ).update(status=Message.Status.FAILED, error="no turn started for it")
    return stale_answering + never_started


def session_end(*, session: ChatSession, now: datetime | None = None) -> bool:
    """End a session (asked for, or idle). Only the database is touched: an ended session
    without a summary is itself the record that one is due, which summaries_due hands out
    (every half minute), so no broker outage can lose it or hold up the person."""
    ended = ChatSession.objects.filter(pk=session.pk, ended_at__isnull=True).update(ended_at=now or timezone.now())
    return ended == 1


def sessions_end_idle(*, now: datetime | None = None) -> int:
    """End every session idle for COACH_SESSION_IDLE_MINUTES. Returns how many."""
    now = now or timezone.now()
    cutoff = now - timedelta(minutes=settings.COACH_SESSION_IDLE_MINUTES)
    idle = ChatSession.objects.filter(ended_at__isnull=True, last_message_at__lt=cutoff, messages__isnull=False)
    ended = 0
    for session in idle.distinct().only("pk"):
        ended += session_end(session=session, now=now)
    return ended


def summaries_due(*, now: datetime | None = None, limit: int = 100) -> list[int]:
    """Take the ended sessions still without a summary, and not taken by a worker within
    SUMMARY_LEASE_SECONDS (one that died, or a task the broker lost): their ids. Each is
    taken by exactly one caller. A conversation that is not remembered is never
    summarised: it stays without one, so no recap or weekly episode ever draws on it."""
    now = now or timezone.now()
    lease_over = now - timedelta(seconds=SUMMARY_LEASE_SECONDS)
    due = (
        ChatSession.objects.filter(ended_at__isnull=False, summarised_at__isnull=True, remembered=True)
        .filter(Q(summary_claimed_at__isnull=True) | Q(summary_claimed_at__lt=lease_over))
        .order_by("ended_at")
    )
    with transaction.atomic():
        ids = list(due.select_for_update(skip_locked=True).values_list("pk", flat=True)[:limit])
        ChatSession.objects.filter(pk__in=ids).update(summary_claimed_at=now)
    return ids


def session_summary_save(*, session: ChatSession, summary: str, now: datetime | None = None) -> bool:
    """Keep the session's summary, once: a second worker's (a lease that ran out while the
    first was still at it) is not kept. Whether this one was."""
    saved = ChatSession.objects.filter(pk=session.pk, summarised_at__isnull=True).update(
        summary=summary, summarised_at=now or timezone.now()
    )
    return saved == 1


def _check_text(text: str) -> str:
    text = text.strip()
    if not text:
        raise MessageRejected("Write something first: the message is empty.")
    if len(text) > settings.COACH_MAX_MESSAGE_CHARS:
        raise MessageRejected(
            f"That message is {len(text):,} characters; the most is {settings.COACH_MAX_MESSAGE_CHARS:,}. "
            "Try splitting it in two."
        )
    return text


def _reply_create(
    message: Message, *, text: str, status: str, now: datetime, tokens: ReplyTokens | None = None
) -> Message:
    reply = _reply(message, text=text, status=status, now=now, tokens=tokens)
    reply.save(force_insert=True)
    return reply


def _reply(message: Message, *, text: str, status: str, now: datetime, tokens: ReplyTokens | None = None) -> Message:
    return Message(
        session_id=message.session_id,
        role=Message.Role.ASSISTANT,
        content=text,
        status=status,
        reply_to_id=message.pk,
        created_at=now,
        prompt_tokens=tokens.prompt if tokens else None,
        completion_tokens=tokens.completion if tokens else None,
        tokens_estimated=tokens.estimated if tokens else False,
    )


def _title_from(text: str) -> str:
    first_line = " ".join(text.split())
    if len(first_line) <= TITLE_MAX_CHARS:
        return first_line
    return first_line[: TITLE_MAX_CHARS - 1].rsplit(" ", 1)[0] + "…"
