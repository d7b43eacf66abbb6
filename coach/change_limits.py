"""How many changes one person may make a minute on their pages: adding, editing, deleting
or keeping a memory, answering a suggestion, restoring, undoing, merging, a conversation
ended or deleted, a setting changed. Each embeds text, rewrites what the coach reads, or
clears Redis; repeated without end, one person would spend the model and the database for
everyone. Counted per person in every web process at once (coach/limits.py), all kinds
together, up to CHANGES_PER_MINUTE; past it, a 429 that says to wait, and nothing changes."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.http import HttpResponse
from django.shortcuts import render

from coach.limits import within_rate
from coach.middleware import HtmxHttpRequest, SignedInHttpRequest, way_back

TOO_MANY_CHANGES = "That is a lot of changes in a minute. Wait a moment, then try again: nothing was changed."
WINDOW_SECONDS = 60


def changes_counted[V: Callable[..., HttpResponse]](view: V) -> V:
    """Count each POST to `view` as one change of the person's, refused past the limit.
    Goes inside login_required: only a signed-in person's changes reach it."""

    @wraps(view)
    def counted(request: SignedInHttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method == "POST" and not within_rate(
            request.user.pk, "changes", limit=settings.CHANGES_PER_MINUTE, window_seconds=WINDOW_SECONDS
        ):
            return too_many_changes(request)
        return view(request, *args, **kwargs)

    return counted  # type: ignore[return-value]  # the same view, with the same signature


def too_many_changes(request: HtmxHttpRequest) -> HttpResponse:
    """429, said where the page shows what went wrong (whatever part of it the form meant to
    replace), or, for a plain form post, on a page of its own with the way back."""
    if request.htmx:
        response = HttpResponse(TOO_MANY_CHANGES, status=429, content_type="text/plain; charset=utf-8")
        response["HX-Retarget"] = "#page-alert"
        response["HX-Reswap"] = "innerHTML"
        return response
    context = {"back": way_back(request), "said": TOO_MANY_CHANGES}
    return render(request, "coach/too_many_changes.html", context, status=429)
