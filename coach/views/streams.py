"""What a browser follows as server-sent events: one reply as it is written, and the new
messages of a conversation open in several tabs.

Both read Redis (coach/streams.py), so any web process serves any reader: a reload, a
second tab or a reconnect replays the reply from its start (or from the Last-Event-ID the
browser sends back) and follows the rest; in the process whose turn writes the reply, the
rest is handed over there as it is written (coach/streams.ReplyFollower). A reader whose
stream has gone quiet asks the database what became of the message, so one whose turn's
events never reached Redis still learns the outcome. Each person may hold
COACH_MAX_OPEN_STREAMS readers open.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncGenerator, Awaitable
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, overload

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.db import DatabaseError
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from redis import RedisError

from coach import open_readers, streams
from coach.claims import FAILED_RETRYABLE, REACHED_LENGTH
from coach.middleware import SignedInHttpRequest
from coach.models import Message
from coach.rendering import render_reply
from coach.selectors import message_to_follow_in, message_to_follow_with_login, sessions_for_user
from coach.temporary import viewer_close, viewer_seen
from coach.turn import turn_start_unless_started
from infra.dbsteps import db_step, release_connection, release_request_connection

if TYPE_CHECKING:
    from accounts.models import User

logger = logging.getLogger(__name__)

TOO_MANY_STREAMS = "You have a lot of chat tabs open. Close a few, then reload this one."
GONE = "This conversation was deleted, so there is no reply to show."
# A quiet stream says so this often (a comment line), which keeps proxies from closing it
# and lets the reader look up, in the database, a turn whose events never came. Shorter
# than the Redis client's socket timeout, which a blocking read must not reach.
QUIET_SECONDS = 3.0
# How soon a browser reconnects after a dropped connection.
RECONNECT_MILLISECONDS = 1000
# A reader of a conversation's new messages ends after this; the browser reconnects.
SESSION_READER_SECONDS = 600
# Without Redis, a reader looks in the database for the reply this often.
WITHOUT_REDIS_POLL_SECONDS = 1.0


@require_GET
@never_cache
async def reply_stream(request: HttpRequest, pk: int, message_pk: int) -> HttpResponseBase:
    """The reply to one message: every event so far, then each new one until the last."""
    # Who asks and their message in one trip to the request's own thread (not one for the
    # login and another for the message), on the connection that loads the login, which is
    # given back before the stream begins.
    user, message = await sync_to_async(_reader_and_message)(request, pk, message_pk)
    if user is None:
        return redirect_to_login(request.get_full_path())
    if message is None:
        raise Http404("No such message.")
    token = await _reader_open(user.pk)
    if token is None:
        return HttpResponse(TOO_MANY_STREAMS, status=429, content_type="text/plain; charset=utf-8")
    if message.status == Message.Status.PENDING:
        # Posted, yet no turn has it: its turn is about to claim it, or its web process died
        # before starting one. Start one unless this process already has.
        turn_start_unless_started(user_id=user.pk, message_id=message.pk)
    after = request.headers.get("Last-Event-ID") or "0"
    return _event_stream(_reply_events(user.pk, token, message, after=after))


@login_required
@require_GET
@never_cache
async def session_events(request: SignedInHttpRequest, pk: int) -> HttpResponseBase:
    """Each message posted in this conversation from now on (by any tab), so every open tab
    shows it; the tab fetches the message's exchange and follows its reply."""
    user = await request.auser()
    # In the request's own thread, on the connection that loaded the login, then given back.
    temporary = await sync_to_async(
        sessions_for_user(user=user).filter(pk=pk).values_list("temporary", flat=True).first
    )()
    await release_request_connection()
    if temporary is None:
        raise Http404("No such conversation.")
    token = await _reader_open(user.pk)
    if token is None:
        return HttpResponse(TOO_MANY_STREAMS, status=429, content_type="text/plain; charset=utf-8")
    after = request.headers.get("Last-Event-ID")
    if not after:
        after = await _quietly(streams.session_latest(pk), default="$")
    return _event_stream(_session_events(user.pk, token, pk, after=after, temporary=temporary))


def _event_stream(events: AsyncGenerator[str]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(_without_a_connection(events), content_type="text/event-stream")
    # Proxies must pass each event on as it comes, not buffer the reply.
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


async def _without_a_connection(events: AsyncGenerator[str]) -> AsyncGenerator[str]:
    # The stream may last minutes; the connection that loaded the login goes back first.
    # Closing this closes the inner stream at once, so its reader stops counting as open.
    async with aclosing(events):
        await release_request_connection()
        async for event in events:
            yield event


async def _reply_events(user_id: int, token: str, message: Message, *, after: str) -> AsyncGenerator[str]:
    urls = _Urls(message)
    try:
        with streams.ReplyFollower(message.pk) as follower:
            yield f"retry: {RECONNECT_MILLISECONDS}\n\n"
            while True:
                try:
                    events = await follower.read(after=after, block_seconds=QUIET_SECONDS)
                except RedisError:
                    # No stream to follow: the reply is still written and saved; it is shown
                    # whole when the database has it.
                    await asyncio.sleep(WITHOUT_REDIS_POLL_SECONDS)
                    events = []
                for event in events:
                    after = event.id
                    yield _sse(event.kind, urls.complete(event.kind, event.data), event_id=event.id)
                    if event.terminal:
                        return
                if events:
                    continue
                outcome = await db_step(_outcome_of, message.pk)
                if outcome is not None:
                    kind, data = outcome
                    yield _sse(kind, urls.complete(kind, data))
                    return
                yield ": still writing\n\n"
                await _quietly(open_readers.reader_alive(user_id, token))
    finally:
        await _quietly(open_readers.reader_close(user_id, token))


async def _session_events(
    user_id: int, token: str, session_id: int, *, after: str, temporary: bool = False
) -> AsyncGenerator[str]:
    ends_at = time.monotonic() + SESSION_READER_SECONDS

    async def seen() -> None:
        # A temporary conversation stays while a page of it is open (coach/temporary.py).
        if temporary:
            await _quietly(viewer_seen(session_id, token))

    try:
        await seen()
        yield f"retry: {RECONNECT_MILLISECONDS}\n\n"
        while time.monotonic() < ends_at:
            try:
                posted = await streams.session_read(session_id, after=after, block_seconds=QUIET_SECONDS)
            except RedisError:
                # Other tabs' messages show on the next reload meanwhile.
                await asyncio.sleep(QUIET_SECONDS)
                posted = []
            for news in posted:
                after = news.event_id
                url = reverse("exchange", kwargs={"pk": session_id, "message_pk": news.message_id})
                data = {"message_id": news.message_id, "url": url, "again": news.again}
                yield _sse("message", data, event_id=news.event_id)
            if not posted:
                yield ": nothing new\n\n"
                await _quietly(open_readers.reader_alive(user_id, token))
                await seen()
    finally:
        await _quietly(open_readers.reader_close(user_id, token))
        if temporary:
            await _quietly(viewer_close(session_id, token))


async def _reader_open(user_id: int) -> str | None:
    """Count the reader as one of the person's open ones: its token, or None past the limit.
    Without Redis nothing is counted (and the reader is let in, with a warning)."""
    try:
        token, open_now = await open_readers.reader_open(user_id)
    except RedisError as error:
        logger.warning("Redis does not answer (%s): open streams are not counted meanwhile", error)
        return "uncounted"
    if open_now > open_readers.max_open_readers():
        await _quietly(open_readers.reader_close(user_id, token))
        return None
    return token


@overload
async def _quietly[T](work: Awaitable[T]) -> T | None: ...
@overload
async def _quietly[T](work: Awaitable[T], *, default: T) -> T: ...
async def _quietly[T](work: Awaitable[T], *, default: T | None = None) -> T | None:
    """Bookkeeping in Redis that a reader can do without: done if Redis answers."""
    try:
        return await work
    except RedisError:
        return default


class _Urls:
    """Links the page needs beside an event: where to retry, view or undo."""

    def __init__(self, message: Message) -> None:
        kwargs = {"pk": message.session_id, "message_pk": message.pk}
        self._retry = reverse("reply_retry", kwargs=kwargs)
        self._exchange = reverse("exchange", kwargs=kwargs)

    def complete(self, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        if kind == streams.FAILED and data.get("limited"):
            # Go on, or start again: the page shows the exchange as it is now, with both.
            return {**data, "retry_url": self._retry, "exchange_url": self._exchange}
        if kind == streams.FAILED and not data.get("gone"):
            # What is gone cannot be asked again.
            return {**data, "retry_url": self._retry}
        if kind == streams.MEMORY and data.get("action") == "looked_back":
            return {**data, "conversations": [_with_link(c) for c in data.get("conversations", [])]}
        if kind == streams.MEMORY:
            return {**data, **_memory_links(data)}
        return data


def _with_link(conversation: dict[str, Any]) -> dict[str, Any]:
    """A conversation the coach looked back at opens on its own page (the person's own: the
    look-back reads nothing else)."""
    return {**conversation, "url": reverse("session", kwargs={"pk": conversation["session_id"]})}


def _memory_links(cue: dict[str, Any]) -> dict[str, str]:
    """A saved memory can be viewed or undone (deleted); a changed one viewed; a suggested
    change is reviewed on the memory page; a deleted one is among the forgotten."""
    action, memory_id = cue.get("action"), cue.get("memory_id")
    if action == "deleted":
        return {"view_url": reverse("memories_forgotten")}
    if action == "proposed":
        return {"view_url": reverse("memories")}
    links = {"view_url": reverse("memory_detail", kwargs={"pk": memory_id})}
    if action == "saved":
        links["undo_url"] = reverse("memory_delete", kwargs={"pk": memory_id})
    return links


def _reader_and_message(request: HttpRequest, session_pk: int, message_pk: int) -> tuple[User | None, Message | None]:
    """The person signed in (None for a visitor) and their message (None if not theirs),
    the message read in the statement that loads the login."""
    try:
        read = message_to_follow_with_login(request.session, session_pk=session_pk, message_pk=message_pk)
        user = request.user
        if not user.is_authenticated:
            return None, None
        return user, message_to_follow_in(read, user=user, session_pk=session_pk, message_pk=message_pk)
    finally:
        release_connection()


def _outcome_of(message_id: int) -> tuple[str, dict[str, Any]] | None:
    """The terminal event a message's state stands for, or None while it is being answered
    (or the database cannot say just now)."""
    try:
        status = Message.objects.filter(pk=message_id).values_list("status", flat=True).first()
    except DatabaseError:
        logger.warning("the outcome of message %s cannot be read just now", message_id)
        return None
    if status is None:
        # Erased with its account, or its conversation deleted, while a reader followed it.
        return streams.FAILED, {"message": GONE, "gone": True}
    if status in (Message.Status.PENDING, Message.Status.ANSWERING):
        return None
    if status == Message.Status.FAILED:
        if Message.objects.filter(reply_to_id=message_id, status=Message.Status.LIMITED).exists():
            return streams.FAILED, {"message": REACHED_LENGTH, "limited": True}
        return streams.FAILED, {"message": FAILED_RETRYABLE}
    # Its latest answer: one it had before it was answered again is not this one.
    reply = (
        Message.objects.filter(reply_to_id=message_id).exclude(status=Message.Status.REPLACED).order_by("-pk").first()
    )
    html = render_reply(reply.content) if reply is not None else ""
    if reply is not None and reply.status == Message.Status.STOPPED:
        return streams.STOPPED, {"html": html}
    return streams.DONE, {"html": html}


def _sse(kind: str, data: dict[str, Any], *, event_id: str | None = None) -> str:
    lines = [f"id: {event_id}"] if event_id else []
    lines += [f"event: {kind}", f"data: {json.dumps(data)}"]
    return "\n".join(lines) + "\n\n"
