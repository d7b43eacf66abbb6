"""The forms that have the person's last message answered anew (coach/answer_anew.py):
Regenerate, the same words answered again, and Edit, new words in place of the old.

Both work as plain posts too (the page then refreshes until the answer is in). Every
refusal says why beside the form that sent it, which keeps what was typed: as plain words
for htmx (the page's script puts them there), or as the page with them in place.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from coach.answer_anew import AnswerAnewRefused, message_edit, message_regenerate
from coach.limits import within_rate
from coach.middleware import SignedInHttpRequest, cannot_save, when_writes_refused
from coach.models import Message
from coach.services import MessageRejected, TooManyTurns
from coach.views.exchanges import exchange_as_shown
from coach.views.pages import (
    CANNOT_SAVE,
    TOO_MANY_TURNS,
    page_context,
    people_messages,
    posted_text,
    render_exchange,
    start_answer,
)

TOO_MANY_ASKS = "That is a lot to ask of your coach in a minute. Wait a moment, then try again."
OUT_OF_DATE = "This page is out of date. Reload it, then try again."


def _cannot_regenerate(request: SignedInHttpRequest, pk: int, message_pk: int) -> HttpResponse:
    """The database refuses writes: said beside Regenerate."""
    return _cannot_save(request, pk, message_pk, edit=False)


def _cannot_edit(request: SignedInHttpRequest, pk: int, message_pk: int) -> HttpResponse:
    """The database refuses writes: said beside the edit, whose words stay in its box."""
    return _cannot_save(request, pk, message_pk, edit=True)


def _cannot_save(request: SignedInHttpRequest, pk: int, message_pk: int, *, edit: bool) -> HttpResponse:
    if request.htmx:
        return cannot_save(request, CANNOT_SAVE)
    message = get_object_or_404(people_messages(request, pk).select_related("session"), pk=message_pk)
    typed, _ = posted_text(request) if edit else (None, None)
    return _refused(request, message, CANNOT_SAVE, 503, edit=edit, typed=typed)


@login_required
@require_POST
@when_writes_refused(_cannot_regenerate)
def message_regenerate_view(request: SignedInHttpRequest, pk: int, message_pk: int) -> HttpResponse:
    """Have the coach answer the person's last message again; its answer so far is kept as
    an earlier one they may page back to."""
    message = get_object_or_404(people_messages(request, pk).select_related("session"), pk=message_pk)
    return _answered_anew(request, message, message_regenerate)


@login_required
@require_POST
@when_writes_refused(_cannot_edit)
def message_edit_view(request: SignedInHttpRequest, pk: int, message_pk: int) -> HttpResponse:
    """Put the person's new words in place of their last message and have them answered."""
    text, too_long = posted_text(request)
    message = get_object_or_404(people_messages(request, pk).select_related("session"), pk=message_pk)
    if too_long is not None:
        return _refused(request, message, *too_long, edit=True)
    return _answered_anew(request, message, message_edit, text=text)


def _answered_anew(
    request: SignedInHttpRequest, message: Message, ask: Callable[..., bool], **asked: str
) -> HttpResponse:
    typed = asked.get("text")

    def refused(error: str, status: int) -> HttpResponse:
        return _refused(request, message, error, status, edit=typed is not None, typed=typed)

    try:
        asked_at = _asked_at(request)
    except ValueError:
        return refused(OUT_OF_DATE, 400)
    # An answer anew spends the model as a new message does: it counts with them.
    if not within_rate(request.user.pk, "messages", limit=settings.COACH_MESSAGES_PER_MINUTE, window_seconds=60):
        return refused(TOO_MANY_ASKS, 429)
    try:
        now_asked = ask(
            user_id=request.user.pk,
            session_id=message.session_id,
            message_id=message.pk,
            asked_at=asked_at,
            turns_at_most=settings.COACH_MAX_TURNS_AT_ONCE,
            **asked,
        )
    except Message.DoesNotExist:
        raise Http404("No such message.") from None
    except AnswerAnewRefused as refusal:
        return refused(str(refusal), 409)
    except TooManyTurns:
        return refused(TOO_MANY_TURNS, 429)
    except MessageRejected as rejection:
        return refused(str(rejection), 422)
    if now_asked:
        start_answer(request, message, again=True)
    if not request.htmx:
        return redirect(reverse("session", kwargs={"pk": message.session_id}) + f"#exchange-{message.pk}")
    # Asked now, or by the same click a moment ago: the page is shown the exchange as it is.
    message.refresh_from_db()
    return render_exchange(request, exchange_as_shown(user=request.user, message=message))


def _asked_at(request: SignedInHttpRequest) -> datetime | None:
    """When the answer the page showed was asked for (its form says); ValueError if what
    it says is no time at all (a page from elsewhere, or tampered with)."""
    value = request.POST.get("asked_at", "")
    if not value:
        return None
    asked_at = datetime.fromisoformat(value)
    if asked_at.tzinfo is None:
        raise ValueError(f"{value!r} names no time zone")
    return asked_at


def _refused(
    request: SignedInHttpRequest, message: Message, error: str, status: int, *, edit: bool, typed: str | None = None
) -> HttpResponse:
    """`error` beside the form that was sent: the edit's (`edit`, with the words `typed`
    back in its box) or Regenerate's."""
    if request.htmx:
        return HttpResponse(error, status=status, content_type="text/plain; charset=utf-8")
    refused = {"message_id": message.pk, "error": error, "edit": edit, "typed": typed}
    context = {**page_context(request, user=request.user, session=message.session), "answer_anew_refused": refused}
    return render(request, "coach/chat.html", context, status=status)
