"""Project-wide middleware."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, cast

from asgiref.sync import iscoroutinefunction
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.middleware.csp import get_nonce
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.cache import patch_cache_control
from django.utils.decorators import sync_and_async_middleware, sync_only_middleware
from django.utils.http import url_has_allowed_host_and_scheme
from django_htmx.middleware import HtmxDetails

from infra.write_refusals import OUT_OF_CONNECTIONS, why_writes_refused

if TYPE_CHECKING:
    from accounts.models import User

logger = logging.getLogger(__name__)

# What a person reads when the database cannot take a write (a standby after a failover,
# one set read-only, a full disk, no connection to spare), unless the view has words of
# its own.
CANNOT_SAVE = "We can't save right now, so nothing was changed. Try again in a moment."
# What a page that only reads says when there is no connection to read it with.
CANNOT_READ = "We can't reach your coach's records right now. Try again in a moment."

type SyncGetResponse = Callable[[HttpRequest], HttpResponseBase]
type AsyncGetResponse = Callable[[HttpRequest], Awaitable[HttpResponseBase]]


class HtmxHttpRequest(HttpRequest):
    """A request as the views see it: django-htmx's middleware, before every view in
    MIDDLEWARE, has told it whether htmx sent it."""

    htmx: HtmxDetails


class SignedInHttpRequest(HtmxHttpRequest):
    """The request of a view behind login_required: its user is signed in."""

    user: User
    auser: Callable[[], Awaitable[User]]


@sync_and_async_middleware
def csp_nonce_on_every_response(get_response: SyncGetResponse | AsyncGetResponse) -> SyncGetResponse | AsyncGetResponse:
    """Generate the CSP nonce for every request, not only those whose template asks for it.

    Django makes the nonce lazily; a page that renders no script would then get a policy
    without one. Generating it up front keeps every response's policy the same shape.
    """

    if iscoroutinefunction(get_response):
        get_async: AsyncGetResponse = get_response

        async def async_middleware(request: HttpRequest) -> HttpResponseBase:
            _generate(request)
            return await get_async(request)

        return async_middleware
    get_sync = _sync(get_response)

    def middleware(request: HttpRequest) -> HttpResponseBase:
        _generate(request)
        return get_sync(request)

    return middleware


def _generate(request: HttpRequest) -> None:
    nonce = get_nonce(request)
    if nonce is not None:
        str(nonce)


@sync_and_async_middleware
def request_body_within_limit(get_response: SyncGetResponse | AsyncGetResponse) -> SyncGetResponse | AsyncGetResponse:
    """Refuse a form body over DATA_UPLOAD_MAX_MEMORY_SIZE with a 413 that says what to do.

    Django would find out only when a middleware first reads the form (the CSRF check) and
    answer a bare 400, which a page cannot explain. The app takes no uploads, so every
    body is held to the limit by its declared length.
    """

    if iscoroutinefunction(get_response):
        get_async: AsyncGetResponse = get_response

        async def async_middleware(request: HttpRequest) -> HttpResponseBase:
            return _too_large(request) or await get_async(request)

        return async_middleware
    get_sync = _sync(get_response)

    def middleware(request: HttpRequest) -> HttpResponseBase:
        return _too_large(request) or get_sync(request)

    return middleware


def _sync(get_response: SyncGetResponse | AsyncGetResponse) -> SyncGetResponse:
    # Called past the caller's iscoroutinefunction check: a get_response that is not a
    # coroutine function is Django's synchronous one.
    return cast("SyncGetResponse", get_response)


def _too_large(request: HttpRequest) -> HttpResponse | None:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if limit is None:
        return None
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return None
    if length <= limit:
        return None
    return HttpResponse(too_large_text(), status=413, content_type="text/plain; charset=utf-8")


@sync_only_middleware
def never_stored(get_response: SyncGetResponse) -> SyncGetResponse:
    """`Cache-Control: no-store, private` on every response the app renders: a shared
    computer's browser history or a proxy never keeps a person's memories or messages.
    (Static files are served, and cached, before this.)

    Synchronous only, on purpose, and last in MIDDLEWARE. Under ASGI, Django runs a
    middleware that can work either way in async mode while the one inside it is async,
    and then each process_request and process_response of Django's own (the
    MiddlewareMixin kind) hops to a worker thread and back: about fourteen hops a request
    with this stack, milliseconds on a small machine. With a synchronous one innermost,
    every middleware out to the static files runs synchronously, in one thread entered
    once."""

    def middleware(request: HttpRequest) -> HttpResponseBase:
        response = get_response(request)
        patch_cache_control(response, no_store=True, private=True)
        return response

    return middleware


def too_large_text() -> str:
    """What a person reads when they send more than REQUEST_BODY_MAX_BYTES."""
    return (
        f"That is too much to send at once: a message can be up to {settings.COACH_MAX_MESSAGE_CHARS:,} "
        "characters. Try splitting it."
    )


class WritesRefusedAnswered:
    """A database that cannot take a write (read-only, its disk full, out of connections:
    infra/write_refusals.py) gives the page's own error, with a 503, never a 500.

    Reads still work where there is a connection to read with, so pages show; only what
    saves fails, whichever view it is in. An htmx request gets the words as plain text,
    which the page shows beside the form that sent it (and a refused form keeps what was
    typed). A plain form post gets the page the view names with `when_writes_refused`, or
    else a short page saying so. A page that only reads, and found no connection, says
    that instead.

    Synchronous, like every middleware inside the static files (see never_stored)."""

    sync_capable = True
    async_capable = False

    def __init__(self, get_response: SyncGetResponse) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        return self.get_response(request)

    def process_exception(self, request: HtmxHttpRequest, exception: Exception) -> HttpResponse | None:
        why = why_writes_refused(exception)
        if why is None:
            return None
        logger.warning("the database cannot take writes (%s): %s %s answered 503", why, request.method, request.path)
        reading = request.method in ("GET", "HEAD")
        if why == OUT_OF_CONNECTIONS and (reading or not request.htmx):
            # A page is read from the database too (the view's, or only its person): with
            # no connection to give, only words that need none.
            return cannot_save(request, CANNOT_READ if reading else CANNOT_SAVE, reading=reading, offline=True)
        match = request.resolver_match
        if match is not None:
            answer: Callable[..., HttpResponse] | None = getattr(match.func, _ANSWER, None)
            if answer is not None:
                return answer(request, **match.kwargs)
        return cannot_save(request, CANNOT_SAVE)


# The attribute a view's answer hangs on (a function's attribute is set by name, so both sides share it).
_ANSWER = "when_writes_refused"


def when_writes_refused[V: Callable[..., HttpResponseBase]](answer: Callable[..., HttpResponse]) -> Callable[[V], V]:
    """Name the page a view answers with when the database refuses its writes: `answer`
    takes the request and the view's URL arguments (applied inside login_required and the
    like, whose wrappers carry the name outward). Its answer to an htmx request reads
    nothing from the database: it is given when there is no connection to read with too."""

    def named(view: V) -> V:
        setattr(view, _ANSWER, answer)
        return view

    return named


def cannot_save(request: HtmxHttpRequest, text: str, *, reading: bool = False, offline: bool = False) -> HttpResponse:
    """503: `text` as plain words for an htmx request (its page shows them beside the form
    that sent it), or, for a plain form post, a page saying nothing was changed, with the
    way back to the form (`reading`: a page that could not be read, to be asked again).
    `offline`: the page is made of nothing the request would read from the database (its
    person, its login session's messages), for a database with no connection to give."""
    if request.htmx:
        return HttpResponse(text, status=503, content_type="text/plain; charset=utf-8")
    context = {"back": way_back(request), "reading": reading, "again": request.get_full_path()}
    if offline:
        return HttpResponse(render_to_string("coach/cannot_save.html", context), status=503)
    return render(request, "coach/cannot_save.html", context, status=503)


def way_back(request: HttpRequest) -> str:
    """The page a plain form was posted from, when it is one of ours; else the chat."""
    back = request.headers.get("Referer", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        back = reverse("chat")
    return back
