"""Project-wide middleware."""

from __future__ import annotations

from collections.abc import Callable

from asgiref.sync import iscoroutinefunction
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.middleware.csp import get_nonce
from django.utils.cache import patch_cache_control
from django.utils.decorators import sync_and_async_middleware, sync_only_middleware


@sync_and_async_middleware
def csp_nonce_on_every_response(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable:
    """Generate the CSP nonce for every request, not only those whose template asks for it.

    Django makes the nonce lazily; a page that renders no script would then get a policy
    without one. Generating it up front keeps every response's policy the same shape.
    """

    if iscoroutinefunction(get_response):

        async def async_middleware(request: HttpRequest) -> HttpResponse:
            _generate(request)
            return await get_response(request)

        return async_middleware

    def middleware(request: HttpRequest) -> HttpResponse:
        _generate(request)
        return get_response(request)

    return middleware


def _generate(request: HttpRequest) -> None:
    nonce = get_nonce(request)
    if nonce is not None:
        str(nonce)


@sync_and_async_middleware
def request_body_within_limit(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable:
    """Refuse a form body over DATA_UPLOAD_MAX_MEMORY_SIZE with a 413 that says what to do.

    Django would find out only when a middleware first reads the form (the CSRF check) and
    answer a bare 400, which a page cannot explain. The app takes no uploads, so every
    body is held to the limit by its declared length.
    """

    if iscoroutinefunction(get_response):

        async def async_middleware(request: HttpRequest) -> HttpResponse:
            return _too_large(request) or await get_response(request)

        return async_middleware

    def middleware(request: HttpRequest) -> HttpResponse:
        return _too_large(request) or get_response(request)

    return middleware


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
def never_stored(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable:
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

    def middleware(request: HttpRequest) -> HttpResponse:
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
