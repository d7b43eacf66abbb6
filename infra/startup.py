"""What a web process does once, before its first request."""

from __future__ import annotations

import contextvars

from django.urls import get_resolver


def url_resolvers_filled() -> None:
    """Fill Django's URL resolvers now, in a context of their own, not in a request's.

    A resolver marks that it is filling itself in an asgiref Local, which sets a value in
    the context it fills in. Filled in the first request's, that value is inherited by
    every context after it, and asgiref re-homes each such value on every hop between a
    thread and the event loop: some 36 hops a turn, each carrying the app's 22 resolvers.
    That was about a tenth of a turn's CPU. Filled here, in a context then dropped, they
    leave nothing behind (but a namespaced resolver made on its first use, in the request
    that uses it); what a resolver holds once filled is shared by every request."""
    # reverse_dict fills the root resolver, and through it each resolver included in it.
    contextvars.copy_context().run(lambda: get_resolver().reverse_dict)
