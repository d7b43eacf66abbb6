"""Chat writes: sessions, a person's messages (saved before any model call), replies.

A person's message is committed before the model is ever called, so whatever happens
to the model, what they wrote is kept. A reply is saved whole, or marked interrupted.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from coach.models import TITLE_MAX_CHARS, ChatSession, Message

if TYPE_CHECKING:
    from accounts.models import User

# The same text sent again this soon, while the first is still unanswered, is one message
# sent twice (two clicks, two tabs), not two messages.
DUPLICATE_WINDOW_SECONDS = 60


class MessageRejected(Exception):
    """A message that cannot be sent; the text is shown to the person."""


def session_start(
    *, user: User, first_message: str = "", client_id: uuid.UUID | None = None, now: datetime | None = None
) -> ChatSession:
    """A new conversation, with its first message if one was written (both or neither)."""
    now = now or timezone.now()
    with transaction.atomic():
        session = ChatSession.objects.create(user=user, created_at=now, last_message_at=now)
        if first_message.strip():
            message_post(session=session, text=first_message, client_id=client_id, now=now)
    return session


def message_post(
    *, session: ChatSession, text: str, client_id: uuid.UUID | None, now: datetime | None = None
) -> Message:
    """Store what the person wrote, once, before anything else happens."""
    now = now or timezone.now()
    text = text.strip()
    if not text:
        raise MessageRejected("Write something first: the message is empty.")
    if len(text) > settings.COACH_MAX_MESSAGE_CHARS:
        raise MessageRejected(
            f"That message is {len(text):,} characters; the most is {settings.COACH_MAX_MESSAGE_CHARS:,}. "
            "Try splitting it in two."
        )
    with transaction.atomic():
        # Serialises this session's submissions, so a double submit cannot slip through.
        session = ChatSession.objects.select_for_update().get(pk=session.pk)
        if client_id is not None and (same := Message.objects.filter(session=session, client_id=client_id).first()):
            return same
        last = Message.objects.filter(session=session, role=Message.Role.USER).order_by("-created_at", "-pk").first()
        if (
            last is not None
            and last.content == text
            and last.status in (Message.Status.PENDING, Message.Status.ANSWERING)
            and now - last.created_at < timedelta(seconds=DUPLICATE_WINDOW_SECONDS)
        ):
            return last
        message = Message.objects.create(
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
            session.ended_at, session.summarised_at = None, None
        if not session.title:
            session.title = _title_from(text)
        session.save(update_fields=["last_message_at", "ended_at", "summarised_at", "title", "updated_at"])
    return message


def turn_claim(*, message: Message) -> bool:
    """Take the right to answer a message. Only one turn may run per message: a second
    stream for it (a reconnect, another tab) gets False."""
    claimed = Message.objects.filter(pk=message.pk, status=Message.Status.PENDING).update(
        status=Message.Status.ANSWERING, error=""
    )
    return claimed == 1


def reply_save(*, message: Message, text: str, now: datetime | None = None) -> Message:
    """The whole reply; the message it answers is answered."""
    now = now or timezone.now()
    with transaction.atomic():
        reply = _reply_create(message, text=text, status=Message.Status.COMPLETE, now=now)
        Message.objects.filter(pk=message.pk).update(status=Message.Status.ANSWERED, error="")
        ChatSession.objects.filter(pk=message.session_id).update(last_message_at=now, updated_at=now)
    return reply


def reply_fail(*, message: Message, error: str, partial_text: str = "", now: datetime | None = None) -> None:
    """The turn failed: keep the message (to retry), and any part of the reply, marked
    as interrupted so it is never taken for a whole one."""
    now = now or timezone.now()
    with transaction.atomic():
        if partial_text.strip():
            _reply_create(message, text=partial_text, status=Message.Status.INTERRUPTED, now=now)
        Message.objects.filter(pk=message.pk).update(status=Message.Status.FAILED, error=error)


def message_retry(*, message: Message) -> bool:
    """Ask again for a reply to a failed message. The message itself is not sent twice;
    a part-reply from the failed attempt is dropped, since a new one replaces it."""
    with transaction.atomic():
        reset = Message.objects.filter(pk=message.pk, status=Message.Status.FAILED).update(
            status=Message.Status.PENDING, error=""
        )
        if reset:
            Message.objects.filter(reply_to=message, status=Message.Status.INTERRUPTED).delete()
    return reset == 1


def session_end(*, session: ChatSession, now: datetime | None = None) -> bool:
    """End a session (asked for, or idle); its summary is written in the background."""
    from coach.tasks import summarise_session

    now = now or timezone.now()
    with transaction.atomic():
        ended = ChatSession.objects.filter(pk=session.pk, ended_at__isnull=True).update(ended_at=now)
        if ended:
            summarise_session.delay_on_commit(session.pk)
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


def session_summary_save(*, session: ChatSession, summary: str, now: datetime | None = None) -> None:
    ChatSession.objects.filter(pk=session.pk).update(summary=summary, summarised_at=now or timezone.now())


def _reply_create(message: Message, *, text: str, status: str, now: datetime) -> Message:
    return Message.objects.create(
        session_id=message.session_id,
        role=Message.Role.ASSISTANT,
        content=text,
        status=status,
        reply_to=message,
        created_at=now,
    )


def _title_from(text: str) -> str:
    first_line = " ".join(text.split())
    if len(first_line) <= TITLE_MAX_CHARS:
        return first_line
    return first_line[: TITLE_MAX_CHARS - 1].rsplit(" ", 1)[0] + "…"
