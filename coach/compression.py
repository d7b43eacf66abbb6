"""Compressing the pages the app renders (static files come pre-compressed from servestatic).

BREACH reads secrets out of compressed HTTPS responses by watching their length change
with what an attacker reflects into them. Two things keep pages safe to compress: Django
masks the CSRF token afresh for every response, so no secret repeats from one response to
the next, and Django's GZipMiddleware (since 4.2) adds a random number of bytes to each
gzip header ("Heal the Breach"), so lengths no longer say what matched.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponseBase
from django.middleware.gzip import GZipMiddleware

EVENT_STREAM = "text/event-stream"


class GZipPagesMiddleware(GZipMiddleware):
    """GZipMiddleware for everything but server-sent events.

    A reply's words go out as events, each the moment it is written. An event is a few
    words, so compressing it saves next to nothing, while a compressed body invites
    whatever sits between the app and the browser to buffer it into larger blocks, and
    the words would then arrive in lumps. Events go out as they are."""

    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        if response.get("Content-Type", "").startswith(EVENT_STREAM):
            return response
        return super().process_response(request, response)
