"""A temporary conversation: one the person chose not to have remembered ("Don't remember
this conversation"). Nothing is read from memory for it or written to it, and it is never
listed; it is deleted, with everything said in it, when it ends or the person leaves it
(DESIGN.md section 8):

- it ends: the person ends it (at once), or it goes COACH_SESSION_IDLE_MINUTES without a
  message while no page of it is open;
- they leave it: the page showing it is closed or left for another (its script says so as
  it goes), and LEAVE_GRACE_SECONDS later no page of it is open: a reload, or another tab
  on it, keeps it. A page is open while its stream of the conversation's news is
  (coach/views/streams.py), counted in Redis like a person's open readers;
- they sign out.

Deleting it takes its messages, its kept prompt and its title from the database (the
database cascades), and its replies and its stream of news from Redis; a reply still
being written is asked to stop, and its turn writes to its stream no more.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from redis import RedisError

from coach import streams
from coach.models import UNANSWERED, ChatSession, Message
from infra.redis import redis_async, redis_sync

logger = logging.getLogger(__name__)

# How long after a page of it was left a reload or another tab has to show it is still open.
LEAVE_GRACE_SECONDS = 10
# A page counts as open while its stream said so within this (it says so every few seconds).
VIEWER_ALIVE_SECONDS = 15


def viewers_key(session_id: int) -> str:
    return f"coach:viewers:{session_id}"


async def viewer_seen(session_id: int, token: str) -> None:
    """A page of the conversation has its stream open (said as it opens, and every few
    seconds after): it counts as open."""
    key = viewers_key(session_id)
    async with redis_async().pipeline(transaction=True) as pipe:
        pipe.zadd(key, {token: time.time()})
        pipe.expire(key, VIEWER_ALIVE_SECONDS * 4)
        await pipe.execute()


async def viewer_close(session_id: int, token: str) -> None:
    await redis_async().zrem(viewers_key(session_id), token)


def pages_open(session_id: int) -> int:
    """How many pages of the conversation have its stream open now (RedisError when Redis
    cannot say)."""
    return int(redis_sync().zcount(viewers_key(session_id), time.time() - VIEWER_ALIVE_SECONDS, "+inf"))


def temporary_conversation_left(*, user_id: int, session_id: int, now: datetime | None = None) -> bool:
    """A page showing the person's temporary conversation was left: it is deleted by the
    next sweep from LEAVE_GRACE_SECONDS on, unless a page of it is open then. Whether it was
    their temporary conversation."""
    left = ChatSession.objects.filter(pk=session_id, user_id=user_id, temporary=True)
    return left.update(left_at=now or timezone.now()) == 1


def temporary_conversation_shown(*, session: ChatSession) -> None:
    """A page of it was loaded (again): whatever page was left before, this one is open."""
    if session.temporary and session.left_at is not None:
        ChatSession.objects.filter(pk=session.pk).update(left_at=None)
        session.left_at = None


def temporary_conversations_sweep(*, now: datetime | None = None) -> int:
    """Delete each temporary conversation that was left LEAVE_GRACE_SECONDS ago or more, or
    has had no message for COACH_SESSION_IDLE_MINUTES, and has no page open now. One left
    whose page is open again (a reload, another tab) is kept, and no longer counts as left.
    Returns how many were deleted."""
    now = now or timezone.now()
    over = ChatSession.objects.filter(temporary=True).filter(
        Q(left_at__lte=now - timedelta(seconds=LEAVE_GRACE_SECONDS))
        | Q(last_message_at__lt=now - timedelta(minutes=settings.COACH_SESSION_IDLE_MINUTES))
    )
    deleted = 0
    for session_id, user_id in over.values_list("pk", "user_id"):
        try:
            still_open = pages_open(session_id) > 0
        except RedisError as error:
            # Without Redis no stream of it is open either: the person's leaving stands.
            logger.warning("open pages of temporary conversation %s unknown (%s): deleted", session_id, error)
            still_open = False
        if still_open:
            ChatSession.objects.filter(pk=session_id).update(left_at=None)
            continue
        deleted += temporary_conversation_forget(user_id=user_id, session_id=session_id)
    return deleted


def temporary_conversations_forget_all(*, user_id: int) -> int:
    """Delete every temporary conversation of the person (they signed out). How many."""
    ids = ChatSession.objects.filter(user_id=user_id, temporary=True).values_list("pk", flat=True)
    return sum(temporary_conversation_forget(user_id=user_id, session_id=session_id) for session_id in list(ids))


def temporary_conversation_forget(*, user_id: int, session_id: int) -> bool:
    """Delete the person's temporary conversation and everything said in it, in the
    database and then in Redis (see above). Whether it was theirs and temporary."""
    with transaction.atomic():
        said = Message.objects.filter(session_id=session_id, session__user_id=user_id, session__temporary=True)
        message_ids = list(said.values_list("pk", flat=True))
        running = list(said.filter(role=Message.Role.USER, status__in=UNANSWERED).values_list("pk", flat=True))
        deleted, _ = ChatSession.objects.filter(pk=session_id, user_id=user_id, temporary=True).delete()
    if not deleted:
        return False
    try:
        # Dropped and marked forgotten: a turn still running writes to its stream no more.
        streams.replies_forget(message_ids)
        streams.session_forget(session_id)
        redis_sync().delete(viewers_key(session_id))
        for message_id in running:
            streams.stop_request(message_id)
    except RedisError as error:
        # The conversation is deleted; its streams expire within the hour on their own.
        logger.warning("the streams of temporary conversation %s could not be dropped now: %s", session_id, error)
    return True
