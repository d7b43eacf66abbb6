"""The chat pages, the reply stream, and the health check."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from coach.conversation import Conversation, conversation_for_turn
from coach.models import ChatSession, Message
from coach.rendering import render_reply
from coach.selectors import messages_for_user, session_messages, sessions_for_user
from coach.services import MessageRejected, message_post, message_retry, session_end, session_start, turn_claim
from coach.turn import FAILED_RETRYABLE, ReplyDone, ReplyFailed, ReplyText, TurnEvent, stream_turn
from infra.dbsteps import db_step
from infra.health import database_problem, redis_problem

if TYPE_CHECKING:
    from accounts.models import User

SIDEBAR_SESSIONS = 50
WAIT_FOR_OTHER_TURN_SECONDS = 120
POLL_SECONDS = 0.5


@dataclass(frozen=True)
class Exchange:
    """A person's message and what became of it."""

    message: Message
    reply: Message | None


@login_required
@require_GET
def chat(request: HttpRequest) -> HttpResponse:
    """The latest conversation, or a fresh page to start the first one."""
    if request.user.onboarded_at is None:
        return redirect("onboarding")
    latest = sessions_for_user(user=request.user).filter(ended_at__isnull=True).first()
    if latest is not None:
        return redirect("session", pk=latest.pk)
    return render(request, "coach/chat.html", _page_context(request, session=None))


@login_required
@require_GET
def session_page(request: HttpRequest, pk: int) -> HttpResponse:
    session = get_object_or_404(sessions_for_user(user=request.user), pk=pk)
    return render(request, "coach/chat.html", _page_context(request, session=session))


@login_required
@require_POST
def session_new(request: HttpRequest) -> HttpResponse:
    """Start a conversation, with its first message when one was written."""
    try:
        session = session_start(
            user=request.user, first_message=request.POST.get("text", ""), client_id=_client_id(request)
        )
    except MessageRejected as rejection:
        return _composer_error(request, str(rejection), session=None)
    url = reverse("session", kwargs={"pk": session.pk})
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@login_required
@require_POST
def message_send(request: HttpRequest, pk: int) -> HttpResponse:
    """Save the person's message (once), then hand the page a reply to stream."""
    session = get_object_or_404(sessions_for_user(user=request.user), pk=pk)
    try:
        message = message_post(session=session, text=request.POST.get("text", ""), client_id=_client_id(request))
    except MessageRejected as rejection:
        return _composer_error(request, str(rejection), session=session)
    if not request.htmx:
        return redirect("session", pk=session.pk)
    return render(request, "coach/chat.html#exchange", {"session": session, "exchange": Exchange(message, None)})


@login_required
@require_POST
def reply_retry(request: HttpRequest, pk: int, message_pk: int) -> HttpResponse:
    """Ask for the reply again; the person's message is not sent a second time."""
    message = get_object_or_404(_people_messages(request, pk), pk=message_pk)
    message_retry(message=message)
    message.refresh_from_db()
    if not request.htmx:
        return redirect("session", pk=pk)
    return render(
        request, "coach/chat.html#exchange", {"session": message.session, "exchange": Exchange(message, None)}
    )


@login_required
@require_POST
def session_close(request: HttpRequest, pk: int) -> HttpResponse:
    session = get_object_or_404(sessions_for_user(user=request.user), pk=pk)
    session_end(session=session)
    return HttpResponseClientRedirect(reverse("chat")) if request.htmx else redirect("chat")


@login_required
@require_GET
@never_cache
async def reply_stream(request: HttpRequest, pk: int, message_pk: int) -> HttpResponse:
    """The reply to one message, word by word, as server-sent events.

    Only one stream runs the turn (it claims the message); another (a reconnect, a second
    tab) is told what became of it instead of asking the model twice.
    """
    # One database step for the lookups and the claim; its connection goes back to the
    # pool before the stream starts.
    user = await request.auser()  # already loaded by login_required
    message, conversation = await db_step(_claim_for_stream, user, pk, message_pk)
    if conversation is not None:
        events = stream_turn(user=user, message=message, conversation=conversation)
    else:
        events = _state_of(message)
    response = StreamingHttpResponse(
        _server_sent(events, retry_url=_retry_url(message)), content_type="text/event-stream"
    )
    # Proxies must pass each event on as it comes, not buffer the reply.
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


@require_GET
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    """200 when PostgreSQL and Redis answer; 503 naming each one that does not."""
    problems = {
        name: problem
        for name, problem in (("database", database_problem()), ("redis", redis_problem(settings.REDIS_URL)))
        if problem
    }
    if problems:
        return JsonResponse({"status": "unavailable", "failing": problems}, status=503)
    return JsonResponse({"status": "ok"})


async def _server_sent(events: AsyncIterator[TurnEvent], *, retry_url: str) -> AsyncIterator[str]:
    async for event in events:
        if isinstance(event, ReplyText):
            yield _event("text", {"text": event.text})
        elif isinstance(event, ReplyDone):
            yield _event("done", {"html": event.html})
        elif isinstance(event, ReplyFailed):
            yield _event("failed", {"message": event.message, "retry_url": retry_url})


async def _state_of(message: Message) -> AsyncIterator[TurnEvent]:
    """What became of a message another stream is answering (a reload mid-reply, a second
    tab): wait for that turn to finish, then pass on its outcome."""
    deadline = time.monotonic() + WAIT_FOR_OTHER_TURN_SECONDS
    while True:
        await db_step(message.refresh_from_db, fields=["status"])
        if message.status != Message.Status.ANSWERING or time.monotonic() > deadline:
            break
        await asyncio.sleep(POLL_SECONDS)
    if message.status == Message.Status.ANSWERED:
        reply = await db_step(Message.objects.filter(reply_to=message, status=Message.Status.COMPLETE).last)
        if reply is not None:
            yield ReplyDone(reply_id=reply.pk, html=render_reply(reply.content))
            return
    if message.status == Message.Status.ANSWERING:
        yield ReplyFailed("Your coach is still answering. Reload the page in a moment to see the reply.")
        return
    yield ReplyFailed(FAILED_RETRYABLE)


def _claim_for_stream(user: User, session_pk: int, message_pk: int) -> tuple[Message, Conversation | None]:
    """The message, and if this stream won the right to answer it, what to send the model."""
    people_messages = messages_for_user(user=user).filter(session_id=session_pk, role=Message.Role.USER)
    message = get_object_or_404(people_messages, pk=message_pk)
    if not turn_claim(message=message):
        return message, None
    return message, conversation_for_turn(user=user, message=message, now=timezone.now())


def _event(name: str, data: dict[str, str]) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


def _page_context(request: HttpRequest, *, session: ChatSession | None) -> dict:
    messages = session_messages(session=session) if session else []
    replies = {m.reply_to_id: m for m in messages if m.role == Message.Role.ASSISTANT}
    return {
        "session": session,
        "sessions": sessions_for_user(user=request.user)[:SIDEBAR_SESSIONS],
        "exchanges": [Exchange(m, replies.get(m.pk)) for m in messages if m.role == Message.Role.USER],
        "client_id": uuid.uuid4(),
        "max_chars": settings.COACH_MAX_MESSAGE_CHARS,
    }


def _people_messages(request: HttpRequest, session_pk: int) -> QuerySet[Message]:
    return messages_for_user(user=request.user).filter(session_id=session_pk, role=Message.Role.USER)


def _composer_error(request: HttpRequest, error: str, *, session: ChatSession | None) -> HttpResponse:
    if not request.htmx:
        return render(
            request, "coach/chat.html", {**_page_context(request, session=session), "composer_error": error}, status=422
        )
    response = render(request, "coach/chat.html#composer_error", {"composer_error": error}, status=422)
    # The error goes beside the message box, which keeps what was typed.
    response["HX-Retarget"] = "#composer-error"
    response["HX-Reswap"] = "innerHTML"
    return response


def _client_id(request: HttpRequest) -> uuid.UUID | None:
    try:
        return uuid.UUID(request.POST.get("client_id", ""))
    except ValueError:
        return None


def _retry_url(message: Message) -> str:
    return reverse("reply_retry", kwargs={"pk": message.session_id, "message_pk": message.pk})
