"""Project-wide middleware."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.middleware.csp import get_nonce


def csp_nonce_on_every_response(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable:
    """Generate the CSP nonce for every request, not only those whose template asks for it.

    Django makes the nonce lazily; a page that renders no script would then get a policy
    without one. Generating it up front keeps every response's policy the same shape.
    """

    def middleware(request: HttpRequest) -> HttpResponse:
        nonce = get_nonce(request)
        if nonce is not None:
            str(nonce)
        return get_response(request)

    return middleware
