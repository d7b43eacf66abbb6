"""The chat pages, and the forms that post to them: a message (which starts its turn at
once), a retry, a stop, the end of a session. A conversation may be started as one that
is not remembered (the `not_remembered` box of the first message's form).

Every form works as a plain POST too (without JavaScript: the page then refreshes until
the reply is there), and every refusal says what to do, beside the message box, which
keeps what was typed.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import RequestDataTooBig
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect
from redis import RedisError

from coach import streams
from coach.change_limits import changes_counted
from coach.claims import message_continue, message_retry
from coach.limits import within_rate
from coach.middleware import SignedInHttpRequest, cannot_save, when_writes_refused
from coach.models import ChatSession, Message
from coach.selectors import (
    exchanges_before,
    messages_for_user,
    session_to_write_in,
    sessions_for_user,
    sessions_listed_for_user,
)
from coach.services import (
    MessageRejected,
    TooManyTurns,
    message_post_as,
    session_end,
    session_start,
)
from coach.temporary import temporary_conversation_forget, temporary_conversation_shown
from coach.turn import turn_start
from coach.views.exchanges import Exchange, exchange_as_shown, exchanges_of, paged_to_of
from coach.views.model_help import demo_coach_answers

if TYPE_CHECKING:
    from accounts.models import User

logger = logging.getLogger(__name__)

SIDEBAR_SESSIONS = 50
# A conversation page shows its latest exchanges; earlier ones come this many at a time, on
# request, so a long conversation's page is no larger than a short one's.
EXCHANGES_PER_STEP = 10
# A message is refused, not stored, when one of these is reached; the text stays in the box.
TOO_MANY_TURNS = "Your coach is still answering your other messages. Send this one when a reply is in."
TOO_MANY_MESSAGES = "That is a lot of messages in a minute. Take a breath, then send it again."
TOO_MANY_SESSIONS = "You started several conversations just now. Wait a minute before starting another."
CANNOT_STOP = "The reply can't be stopped just now; it will finish by itself in a moment."
TOO_LONG = "That message is too long to send; the most is {most:,} characters. Try splitting it in two."
CANNOT_SAVE = "We can't save right now; your text is kept in the box. Try again in a moment."
TEMPORARY_DELETED = "Your temporary conversation is deleted, with everything said in it."


@require_GET
def chat(request: HttpRequest) -> HttpResponse:
    """The latest conversation, or a fresh page to start the first one; for a visitor, the
    page that says what the coach is before they sign up."""
    if not request.user.is_authenticated:
        return landing(request)
    if request.user.onboarded_at is None:
        return redirect("onboarding")
    latest = sessions_listed_for_user(user=request.user).filter(ended_at__isnull=True).first()
    if latest is not None:
        return redirect("session", pk=latest.pk)
    return render(request, "coach/chat.html", page_context(request, user=request.user, session=None))


def landing(request: HttpRequest) -> HttpResponse:
    """What the coach does, how it remembers and forgets, and what it promises about privacy.
    The numbers are the settings the eviction policy runs on, so the page cannot drift."""
    context = {
        "max_stored": settings.MEMORY_MAX_STORED,
        "max_episodes": settings.MEMORY_MAX_EPISODES,
        "forgotten_days": settings.MEMORY_FORGOTTEN_DAYS,
    }
    return render(request, "coach/landing.html", context)


def _cannot_save_message(request: SignedInHttpRequest, pk: int | None = None) -> HttpResponse:
    """The database refuses writes (coach/middleware.py): the message box says so, and
    keeps the text, whether the page posted it with htmx or as a plain form."""
    if request.htmx:
        return cannot_save(request, CANNOT_SAVE)
    session = session_to_write_in(user=request.user, pk=pk) if pk is not None else None
    return _composer_error(request, CANNOT_SAVE, 503, session=session)


@login_required
@require_http_methods(["GET", "POST"])
@when_writes_refused(_cannot_save_message)
def session_new(request: SignedInHttpRequest) -> HttpResponse:
    """GET: a fresh page to start a conversation. POST: start it with its first message (a
    conversation with nothing said is never made), once however often it is sent."""
    if request.method == "GET":
        return render(request, "coach/chat.html", page_context(request, user=request.user, session=None))
    text, error = posted_text(request)
    if error is None and not within_rate(
        request.user.pk, "sessions", limit=settings.COACH_SESSIONS_PER_MINUTE, window_seconds=60
    ):
        error = (TOO_MANY_SESSIONS, 429)
    if error is None:
        # Replies at once are counted in session_start, with the person's turns locked.
        error = _too_many_messages(request)
    if error is not None:
        return _composer_error(request, *error, session=None)
    try:
        session = session_start(
            user=request.user,
            first_message=text,
            client_id=_client_id(request),
            remembered=not _not_remembered_chosen(request),
            turns_at_most=settings.COACH_MAX_TURNS_AT_ONCE,
        )
    except TooManyTurns:
        return _composer_error(request, TOO_MANY_TURNS, 429, session=None)
    except MessageRejected as rejection:
        return _composer_error(request, str(rejection), 422, session=None)
    first = Message.objects.filter(session=session, role=Message.Role.USER).order_by("pk").first()
    if first is not None:
        start_answer(request, first)
    url = reverse("session", kwargs={"pk": session.pk})
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@login_required
@require_GET
def session_page(request: SignedInHttpRequest, pk: int) -> HttpResponse:
    """The conversation's latest exchanges; with `before`, the ones before that message
    (htmx: only those, to go above what the page shows)."""
    session = get_object_or_404(sessions_for_user(user=request.user), pk=pk)
    temporary_conversation_shown(session=session)
    before = _earlier_than(request)
    context = page_context(request, user=request.user, session=session, before=before)
    if request.htmx and before is not None:
        return render(request, "coach/chat.html#earlier", context)
    return render(request, "coach/chat.html", context)


def _earlier_than(request: HttpRequest) -> int | None:
    try:
        return int(request.GET["before"])
    except (KeyError, ValueError):
        return None


@login_required
@require_POST
@when_writes_refused(_cannot_save_message)
def message_send(request: SignedInHttpRequest, pk: int) -> HttpResponse:
    """Save the person's message (once) and start its turn; hand the page the reply to follow."""
    text, error = posted_text(request)
    if error is None:
        error = _too_many_messages(request)
    if error is None:
        # The conversation is read with its lock, in the transaction that saves the message;
        # a refusal reads it again below, to show the error in it.
        try:
            message = message_post_as(
                user_id=request.user.pk,
                session_id=pk,
                text=text,
                client_id=_client_id(request),
                turns_at_most=settings.COACH_MAX_TURNS_AT_ONCE,
            )
        except ChatSession.DoesNotExist:
            raise Http404("No such conversation.") from None
        except TooManyTurns:
            error = TOO_MANY_TURNS, 429
        except MessageRejected as rejection:
            error = str(rejection), 422
    if error is not None:
        session = session_to_write_in(user=request.user, pk=pk)
        if session is None:
            raise Http404("No such conversation.")
        return _composer_error(request, *error, session=session)
    start_answer(request, message)
    if not request.htmx:
        return redirect("session", pk=pk)
    return render_exchange(request, Exchange(message, None, last=True))


@login_required
@require_GET
def exchange(request: SignedInHttpRequest, pk: int, message_pk: int) -> HttpResponse:
    """One message and its reply as the page shows it: how another open tab catches up, and
    how the person pages through its answers (`?answer=`, an earlier one)."""
    message = get_object_or_404(people_messages(request, pk).select_related("session"), pk=message_pk)
    paged_to = paged_to_of(request.GET.get("answer"))
    return render_exchange(request, exchange_as_shown(user=request.user, message=message, paged_to=paged_to))


def render_exchange(request: SignedInHttpRequest, exchange: Exchange) -> HttpResponse:
    """The exchange as its partial of the chat page (what htmx swaps in)."""
    context = {"session": exchange.message.session, "exchange": exchange, "max_chars": settings.COACH_MAX_MESSAGE_CHARS}
    return render(request, "coach/chat.html#exchange", context)


@login_required
@require_POST
def reply_retry(request: SignedInHttpRequest, pk: int, message_pk: int) -> HttpResponse:
    """Ask for the reply again; the person's message is not sent a second time."""
    return _answered_again(request, pk, message_pk, message_retry)


@login_required
@require_POST
def reply_continue(request: SignedInHttpRequest, pk: int, message_pk: int) -> HttpResponse:
    """Have the coach go on from a reply it stopped at its length limit: a new attempt whose
    reply opens with the words so far."""
    return _answered_again(request, pk, message_pk, message_continue)


def _answered_again(request: SignedInHttpRequest, pk: int, message_pk: int, ask: Callable[..., bool]) -> HttpResponse:
    message = get_object_or_404(people_messages(request, pk).select_related("session"), pk=message_pk)
    # Asking again spends the model as a new message does: the same limits apply.
    refused = _too_many_messages(request) if message.status == Message.Status.FAILED else None
    try:
        asked = refused is None and ask(message=message, turns_at_most=settings.COACH_MAX_TURNS_AT_ONCE)
    except TooManyTurns:
        refused = TOO_MANY_TURNS, 429
    if refused is not None:
        return _composer_error(request, *refused, session=message.session)
    if asked:
        try:
            streams.reply_forget(message.pk)
        except RedisError:
            # Redis is away: a reader may be shown the earlier attempt until it expires, and
            # a reload shows the new reply from the database once it is saved.
            logger.warning("the earlier reply to message %s could not be cleared from its stream", message.pk)
        start_answer(request, message, again=True)
    message.refresh_from_db()
    if not request.htmx:
        return redirect("session", pk=pk)
    # Asked again here, or already by another tab: either way the page is shown it as it is now.
    return render_exchange(request, exchange_as_shown(user=request.user, message=message))


@login_required
@require_POST
def reply_stop(request: SignedInHttpRequest, pk: int, message_pk: int) -> HttpResponse:
    """Stop the reply being written: what is written so far is kept, marked stopped. The
    turn (in whichever web process runs it) sees the request within a fraction of a second."""
    message = get_object_or_404(people_messages(request, pk), pk=message_pk)
    if message.status in (Message.Status.PENDING, Message.Status.ANSWERING):
        try:
            streams.stop_request(message.pk)
        except RedisError:
            return HttpResponse(CANNOT_STOP, status=503, content_type="text/plain; charset=utf-8")
    if not request.htmx:
        return redirect("session", pk=pk)
    return HttpResponse(status=204)


@login_required
@require_POST
@changes_counted
def session_close(request: SignedInHttpRequest, pk: int) -> HttpResponse:
    session = get_object_or_404(sessions_for_user(user=request.user), pk=pk)
    if session.temporary:
        # Ending a temporary conversation deletes it, and everything said in it.
        temporary_conversation_forget(user_id=request.user.pk, session_id=pk)
        messages.success(request, TEMPORARY_DELETED)
        url = reverse("session_new")
        return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    session_end(session=session)
    # Back to the conversation, which now says it ended and shows its summary when written:
    # another conversation in its place would leave the person wondering what happened.
    url = reverse("session", kwargs={"pk": pk})
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def start_answer(request: SignedInHttpRequest, message: Message, *, again: bool = False) -> None:
    """The turn starts now, whether or not a browser follows it; other tabs are told (that
    the message is answered `again`, when it had been)."""
    turn_start(user_id=request.user.pk, message_id=message.pk)
    try:
        streams.session_announce(message.session_id, message.pk, again=again)
    except Exception:
        # Other tabs learn of it on their next reload; the message and its turn are fine.
        logger.warning("message %s could not be announced to other tabs", message.pk, exc_info=True)


def posted_text(request: HttpRequest) -> tuple[str, tuple[str, int] | None]:
    try:
        return request.POST.get("text", ""), None
    except RequestDataTooBig:
        return "", (TOO_LONG.format(most=settings.COACH_MAX_MESSAGE_CHARS), 413)


def _too_many_messages(request: SignedInHttpRequest) -> tuple[str, int] | None:
    if not within_rate(request.user.pk, "messages", limit=settings.COACH_MESSAGES_PER_MINUTE, window_seconds=60):
        return TOO_MANY_MESSAGES, 429
    return None


def page_context(
    request: HttpRequest, *, user: User, session: ChatSession | None, before: int | None = None
) -> dict[str, object]:
    """What the chat page shows: the conversation (if any), its latest exchanges (or, with
    `before`, the step of them before that message of the person's), the sidebar."""
    messages, earlier = (
        exchanges_before(session=session, before=before, count=EXCHANGES_PER_STEP) if session else ([], False)
    )
    paged_to = paged_to_of(request.GET.get("answer")) if request.method == "GET" else None
    exchanges = (
        exchanges_of(user=user, session=session, messages=messages, paged_to=paged_to, to_the_end=before is None)
        if session
        else []
    )
    return {
        "session": session,
        "sessions": sessions_listed_for_user(user=user)[:SIDEBAR_SESSIONS],
        "exchanges": exchanges,
        # The person's message the next step of earlier exchanges comes before, if any.
        "earlier_than": exchanges[0].message.pk if earlier and exchanges else None,
        "reading_earlier": before is not None,
        "answering": any(e.message.status in (Message.Status.PENDING, Message.Status.ANSWERING) for e in exchanges),
        "client_id": uuid.uuid4(),
        "max_chars": settings.COACH_MAX_MESSAGE_CHARS,
        "memory_enabled": user.memory_enabled,
        "not_remembered": _not_remembered_chosen(request),
        # Said once on the page, not in the replies: the words are a demo's, not a model's.
        "demo_coach": demo_coach_answers(),
    }


def _not_remembered_chosen(request: HttpRequest) -> bool:
    """Whether the person ticked "don't remember this conversation" (or followed a link
    that ticks it for them)."""
    try:
        data = request.POST if request.method == "POST" else request.GET
        return data.get("not_remembered") == "1"
    except RequestDataTooBig:
        return False


def people_messages(request: SignedInHttpRequest, session_pk: int) -> QuerySet[Message]:
    return messages_for_user(user=request.user).filter(session_id=session_pk, role=Message.Role.USER)


def _composer_error(
    request: SignedInHttpRequest, error: str, status: int, *, session: ChatSession | None
) -> HttpResponse:
    if not request.htmx:
        typed = "" if status == 413 else request.POST.get("text", "")
        context = {
            **page_context(request, user=request.user, session=session),
            "composer_error": error,
            "typed": typed,
        }
        return render(request, "coach/chat.html", context, status=status)
    response = render(request, "coach/chat.html#composer_error", {"composer_error": error}, status=status)
    # The error goes beside the message box, which keeps what was typed.
    response["HX-Retarget"] = "#composer-error"
    response["HX-Reswap"] = "innerHTML"
    return response


def _client_id(request: HttpRequest) -> uuid.UUID | None:
    try:
        return uuid.UUID(request.POST.get("client_id", ""))
    except ValueError:
        return None
