"""Reading chat sessions and messages, always of the person who asks."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db.models import Count, QuerySet, Subquery
from django.db.models.functions import Coalesce

from coach import statements
from coach.models import UNANSWERED, ChatSession, LookBack, Message
from coach.streams import UNFINISHED_KEEP_SECONDS
from memory.selectors import memories_learned_in

# How far apart two web processes' clocks may be, for a time one wrote and another reads.
CLOCK_MARGIN_SECONDS = 300

if TYPE_CHECKING:
    from collections.abc import Sequence

    from django.contrib.sessions.backends.base import SessionBase

    from accounts.models import User


def sessions_for_user(*, user: User) -> QuerySet[ChatSession]:
    return ChatSession.objects.filter(user=user).order_by("-last_message_at", "-pk")


def sessions_listed_for_user(*, user: User) -> QuerySet[ChatSession]:
    """The person's conversations as their list shows them: never a temporary one, which
    leaves nothing behind, its first words least of all."""
    return sessions_for_user(user=user).filter(temporary=False)


def session_summaries_for_user(*, user: User, limit: int = 50) -> list[ChatSession]:
    """The person's ended conversations whose summary the coach keeps, newest first. The
    summary is encrypted, so "has one" is read after decrypting, not in SQL."""
    summarised = (
        ChatSession.objects.filter(user=user, ended_at__isnull=False, summarised_at__isnull=False)
        .only("pk", "user_id", "title", "summary", "ended_at", "temporary")
        .order_by("-ended_at", "-pk")
    )
    kept = []
    for session in summarised.iterator(chunk_size=limit):
        if session.summary:
            kept.append(session)
            if len(kept) == limit:
                break
    return kept


def messages_for_user(*, user: User) -> QuerySet[Message]:
    return Message.objects.filter(session__user=user).select_related("session")


def session_messages(*, session: ChatSession) -> list[Message]:
    return list(Message.objects.filter(session=session).order_by("created_at", "pk"))


def exchanges_before(*, session: ChatSession, before: int | None, count: int) -> tuple[list[Message], bool]:
    """The conversation's `count` latest exchanges before the person's message `before`
    (the latest of all without it): each message and its replies, oldest first, and whether
    there are earlier ones. Two statements through the conversation's index of messages in
    order, whatever the conversation's length."""
    said = Message.objects.filter(session=session, role=Message.Role.USER)
    if before is not None:
        said = said.filter(pk__lt=before)
    latest = list(said.order_by("-pk")[: count + 1])
    shown = latest[:count]
    # A reply is written after its message: the range from the oldest shown bounds the
    # read to the page's end of the conversation, whichever index serves it.
    replies = Message.objects.filter(
        session=session, reply_to_id__in=[m.pk for m in shown], pk__gt=min((m.pk for m in shown), default=0)
    )
    return sorted([*shown, *replies], key=lambda m: (m.created_at, m.pk)), len(latest) > count


@dataclass(frozen=True)
class KeptMemory:
    """A memory an exchange left the coach keeping, as the page shows it under that exchange."""

    memory_id: int
    summary: str
    # True when the exchange made the memory; False when it changed one kept before.
    new: bool


def memories_kept_from(*, user: User, messages: Sequence[Message]) -> dict[int, list[KeptMemory]]:
    """What each exchange left in the person's memory, by the id of the message that began
    it: the quiet cues its reply showed as it was written, shown again on a page loaded
    afterwards. Only what is kept now, as it reads now: a memory since deleted is not
    named, and one changed by a later exchange is shown under that one. Of an exchange
    still being answered, only what its earlier answers left (it was answered again,
    edited or retried): what the answer being written keeps, its reply's stream replays.

    A memory is new to the exchange when it was made after the message was sent, by any
    answer to it (a retry's, a replaced one's); one the person's other turn made meanwhile
    counts as new too."""
    people = {m.pk: m for m in messages if m.role == Message.Role.USER}
    kept: dict[int, list[KeptMemory]] = {}
    for memory in memories_learned_in(user=user, message_ids=list(people)):
        assert memory.message_id is not None  # learned in one of these messages
        message = people[memory.message_id]
        if message.status in UNANSWERED and (
            message.waiting_since is None or memory.updated_at >= message.waiting_since
        ):
            continue
        kept.setdefault(message.pk, []).append(
            KeptMemory(memory_id=memory.pk, summary=memory.summary, new=memory.created_at >= message.created_at)
        )
    return kept


@dataclass(frozen=True)
class LookedBackAt:
    """A past conversation the coach looked back at while answering an exchange, as the
    page shows it under that exchange."""

    session_id: int
    began_at: datetime


def look_backs_of(*, user: User, messages: Sequence[Message]) -> dict[int, list[LookedBackAt]]:
    """The conversations the coach looked back at for each of these messages, by message
    id, oldest look first: the quiet cues their replies showed, shown again on a page loaded
    afterwards. One query; a conversation since deleted is gone from them with its rows. An
    exchange still being answered has none here: its reply's stream replays its cues."""
    ids = [m.pk for m in messages if m.role == Message.Role.USER and m.status not in UNANSWERED]
    looked: dict[int, list[LookedBackAt]] = {}
    if not ids:
        return looked
    rows = (
        LookBack.objects.filter(user=user, message_id__in=ids)
        .order_by("pk")
        .values_list("message_id", "looked_at_id", "looked_at__created_at")
    )
    for message_id, session_id, began_at in rows:
        looked.setdefault(message_id, []).append(LookedBackAt(session_id=session_id, began_at=began_at))
    return looked


def messages_with_replies_kept(*, user: User, now: datetime) -> list[int]:
    """The ids of the person's messages whose reply may still be in its Redis stream: those
    answered (claimed) lately enough. A stream is kept a while after its last piece, which
    comes at the latest at the turn's deadline; the margin covers the clocks of the
    processes that claimed and that ask."""
    kept = settings.COACH_TURN_DEADLINE_SECONDS + UNFINISHED_KEEP_SECONDS + CLOCK_MARGIN_SECONDS
    since = now - timedelta(seconds=kept)
    return list(messages_for_user(user=user).filter(claimed_at__gte=since).values_list("pk", flat=True))


def summarised_sessions_between(*, user: User, start: datetime, end: datetime) -> list[ChatSession]:
    """The person's summarised sessions whose last message fell in [start, end), oldest first."""
    return list(
        ChatSession.objects.filter(
            user=user, summarised_at__isnull=False, last_message_at__gte=start, last_message_at__lt=end
        ).order_by("last_message_at", "pk")
    )


def session_to_write_in(*, user: User, pk: int) -> ChatSession | None:
    """The person's conversation a message is sent to, with `running_turns` (as
    running_turns_of counts them) read in the same query."""
    return _with_running_turns(user=user).filter(pk=pk).first()


def _with_running_turns(*, user: User) -> QuerySet[ChatSession]:
    # The count is of the query's snapshot, taken before any wait for a lock: as fresh as
    # the limit it serves needs.
    running = (
        Message.objects.filter(session__user=user, role=Message.Role.USER, status__in=UNANSWERED)
        .order_by()
        .values("session__user")
        .annotate(count=Count("pk"))
        .values("count")
    )
    return sessions_for_user(user=user).annotate(running_turns=Coalesce(Subquery(running), 0))


def message_to_follow(*, user: User, session_pk: int, message_pk: int) -> Message | None:
    """The person's own message in that conversation, as a reader of its reply needs it
    (id, conversation, status; no text to decrypt): None if it is not theirs."""
    theirs = Message.objects.filter(pk=message_pk, session_id=session_pk, role=Message.Role.USER, session__user=user)
    return theirs.only(*statements.FOLLOWED).first()


def message_to_follow_with_login(
    session_store: SessionBase, *, session_pk: int, message_pk: int
) -> Sequence[object] | None:
    """Load the request's login session (`session_store`) in the statement that reads the
    message its reader follows: what message_to_follow_in takes, or None where the store
    cannot (its engine reads no more than the login, or it was loaded already); then
    message_to_follow reads the message."""
    load_with = getattr(session_store, "load_with", None)
    if load_with is None:
        return None
    columns, joins = statements.message_to_follow_sql()
    parameters = {"session_id": session_pk, "message_id": message_pk, "role": Message.Role.USER}
    read: Sequence[object] | None = load_with(columns=columns, joins=joins, parameters=parameters)
    return read


def message_to_follow_in(
    read: Sequence[object] | None, *, user: User, session_pk: int, message_pk: int
) -> Message | None:
    """message_to_follow, from what message_to_follow_with_login `read` for `user`. Read on
    its own where that read nothing, or read a login session with no owner recorded (its
    person is signed in all the same, read by the authentication backend)."""
    if read is None or read[0] is None:
        return message_to_follow(user=user, session_pk=session_pk, message_pk=message_pk)
    return statements.message_to_follow_from(read, user_id=user.pk)


def running_turns_of(*, user: User) -> int:
    """How many of the person's messages are waiting for, or getting, a reply now."""
    return Message.objects.filter(session__user=user, role=Message.Role.USER, status__in=UNANSWERED).count()
