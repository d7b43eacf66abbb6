"""Chat writes: sessions, a person's messages (saved before any model call), ending
sessions and keeping their summaries. The claim on a turn, its reply and the sweep are in
coach/claims.py.

A person's message is committed before the model is ever called, so whatever happens
to the model, what they wrote is kept.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from redis import RedisError

from coach import stream_cues, streams
from coach.exchange_index import exchange_keep_out
from coach.models import TITLE_MAX_CHARS, UNANSWERED, ChatSession, ConversationEmbedding, Message
from coach.prompting import REOPENED
from coach.selectors import messages_with_replies_kept
from coach.statements import message_add_unless_sent, session_locked

if TYPE_CHECKING:
    from accounts.models import User

logger = logging.getLogger(__name__)

# The same text sent again this soon, while the first is still unanswered, is one message
# sent twice (two clicks, two tabs), not two messages.
DUPLICATE_WINDOW_SECONDS = 60
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


def session_start(
    *,
    user: User,
    first_message: str | None = None,
    client_id: uuid.UUID | None = None,
    remembered: bool = True,
    turns_at_most: int | None = None,
    now: datetime | None = None,
) -> ChatSession:
    """A new conversation with its first message (both or neither; an empty one only when
    no message is given at all, as the app's own code does). `remembered=False` starts a
    temporary one, which is not remembered and is deleted when it ends or the person leaves
    it (coach/temporary.py); while the person has memory off, every one is not remembered
    (but only one they chose so is temporary). TooManyTurns (and no conversation) when
    `turns_at_most` of their messages are being answered.

    Idempotent by `client_id`: the same submission twice (a double click, a retried
    request) is the conversation the first one started, not a second one."""
    now = now or timezone.now()
    if first_message is not None:
        message_text_checked(first_message)
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
            user=user,
            created_at=now,
            last_message_at=now,
            remembered=remembered and memory_enabled,
            temporary=not remembered,
        )
        if first_message is not None:
            message_post_as(
                user_id=user.pk,
                session_id=session.pk,
                text=first_message,
                client_id=client_id,
                turns_at_most=turns_at_most,
                now=now,
            )
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
    text = message_text_checked(text)
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
            waiting_since=now,
            # A conversation that is not remembered is never indexed: nothing waits for it.
            indexed=not session.remembered,
        )
        session.last_message_at = now
        if session.ended_at is not None:
            # Reopened: it is summarised again when it ends again, with what came after.
            session.ended_at, session.summarised_at, session.summary_claimed_at = None, None, None
        if not session.title and not session.temporary:
            # A temporary conversation is never named by what was said in it.
            session.title = title_from(text)
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
        if added is None:
            # The same submission again: it was not added, and the one there is found.
            assert found is not None
            return found
        if found is not None and found.content == text and found.status in UNANSWERED:
            # The same words again while the first are unanswered (two tabs): taken back.
            raise _SentAlready(found)
    return added


def session_delete(*, user: User, session_id: int) -> list[int] | None:
    """The person's conversation deleted from the database: its messages, its summary, what
    the look-back could find of it (its embeddings) and the look-backs at it, in one
    statement (the database cascades). Returns the ids of its messages, for
    session_streams_forget once the transaction is over; None if it was not theirs. What the
    coach learnt in it and kept as memories stays, on the memory page, to delete there."""
    message_ids = list(Message.objects.filter(session__user=user, session_id=session_id).values_list("pk", flat=True))
    deleted, _ = ChatSession.objects.filter(user=user, pk=session_id).delete()
    return message_ids if deleted else None


def session_streams_forget(*, user: User, session_id: int, message_ids: list[int]) -> None:
    """After a conversation was deleted: its replies kept in Redis, its stream of announced
    messages, and any look-back cue naming it in the person's other replies there. A reply
    still being written in it cannot be saved (its message is gone)."""
    try:
        streams.replies_forget(message_ids)
        streams.session_forget(session_id)
        stream_cues.look_back_cues_forget(messages_with_replies_kept(user=user, now=timezone.now()), session_id)
    except RedisError as error:
        # The conversation is deleted; its streams expire within the hour on their own.
        logger.warning("the streams of deleted conversation %s could not be dropped now: %s", session_id, error)


def session_end(*, session: ChatSession, now: datetime | None = None) -> bool:
    """End a session (asked for, or idle). Only the database is touched: an ended session
    without a summary is itself the record that one is due, which summaries_due hands out
    (every half minute), so no broker outage can lose it or hold up the person. Its kept
    prompt goes with it: it quotes memories, which are kept no longer than they are of use
    (a conversation reopened assembles a new one)."""
    ended = ChatSession.objects.filter(pk=session.pk, ended_at__isnull=True).update(
        ended_at=now or timezone.now(), prompt="", prompt_built_at=None, prompt_cleared_because=REOPENED
    )
    return ended == 1


def sessions_end_idle(*, now: datetime | None = None) -> int:
    """End every session idle for COACH_SESSION_IDLE_MINUTES. Returns how many."""
    now = now or timezone.now()
    cutoff = now - timedelta(minutes=settings.COACH_SESSION_IDLE_MINUTES)
    # A temporary conversation is not ended but deleted, once no page of it is open
    # (coach/temporary.py).
    idle = ChatSession.objects.filter(
        ended_at__isnull=True, temporary=False, last_message_at__lt=cutoff, messages__isnull=False
    )
    ended = 0
    for session in idle.distinct().only("pk"):
        ended += session_end(session=session, now=now)
    return ended


def summaries_due(*, now: datetime | None = None, limit: int = 100) -> list[int]:
    """Take the ended sessions still without a summary, and not taken by a worker within
    SUMMARY_LEASE_SECONDS (one that died, or a task the broker lost): their ids. Each is
    taken by exactly one caller. A conversation that is not remembered is never
    summarised: it stays without one, so no recap or weekly episode ever draws on it; nor
    is one whose summary the person deleted, however it went on after."""
    now = now or timezone.now()
    lease_over = now - timedelta(seconds=SUMMARY_LEASE_SECONDS)
    due = (
        ChatSession.objects.filter(
            ended_at__isnull=False, summarised_at__isnull=True, remembered=True, summary_forgotten_at__isnull=True
        )
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
        summary=summary, summarised_at=now or timezone.now(), summary_indexed=False
    )
    return saved == 1


def session_summary_forget(*, user: User, session_id: int, now: datetime | None = None) -> bool:
    """The person deletes what the coach kept of a conversation: its summary, which recaps
    and weekly episodes draw on, and its embedding, by which the look-back found it. None
    is written again, however the conversation goes on. Whether there was one of theirs to
    delete."""
    now = now or timezone.now()
    with transaction.atomic():
        session = ChatSession.objects.select_for_update().filter(user=user, pk=session_id).first()
        if session is None or not session.summary:
            return False
        session.summary, session.summarised_at = "", session.summarised_at or now
        session.summary_forgotten_at = now
        session.save(update_fields=["summary", "summarised_at", "summary_forgotten_at", "updated_at"])
        ConversationEmbedding.objects.filter(session=session, kind=ConversationEmbedding.Kind.SUMMARY).delete()
    return True


def message_keep_out(*, user_id: int, message_id: int) -> bool:
    """A message said while the person's memory is off: marked so before it is answered,
    so nothing the coach keeps or makes of the conversation ever reads it or its reply (no
    summary, recap, weekly episode or look-back), even once memory is back on. Whether it
    was the person's."""
    marked = Message.objects.filter(pk=message_id, session__user_id=user_id, role=Message.Role.USER).update(
        said_with_memory_off=True
    )
    if marked:
        exchange_keep_out(user_id=user_id, message_id=message_id)
    return marked == 1


def message_text_checked(text: str) -> str:
    """What the person wrote, as it is kept (stripped); MessageRejected, with words for
    them, when it cannot be sent."""
    text = text.strip()
    if not text:
        raise MessageRejected("Write something first: the message is empty.")
    if len(text) > settings.COACH_MAX_MESSAGE_CHARS:
        raise MessageRejected(
            f"That message is {len(text):,} characters; the most is {settings.COACH_MAX_MESSAGE_CHARS:,}. "
            "Try splitting it in two."
        )
    return text


def title_from(text: str) -> str:
    """A conversation's title: its first message's first line, cut at a word."""
    first_line = " ".join(text.split())
    if len(first_line) <= TITLE_MAX_CHARS:
        return first_line
    return first_line[: TITLE_MAX_CHARS - 1].rsplit(" ", 1)[0] + "…"
