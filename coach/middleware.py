"""Project-wide middleware."""

from __future__ import annotations

from collections.abc import Callable

from asgiref.sync import iscoroutinefunction
from django.http import HttpRequest, HttpResponse
from django.middleware.csp import get_nonce
from django.utils.decorators import sync_and_async_middleware


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
