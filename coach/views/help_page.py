"""The help page: where to turn when someone is in danger (the coach points here, and stops
coaching), and where the rest of the help is."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET


@require_GET
def help_page(request: HttpRequest) -> HttpResponse:
    """Open to everyone, signed in or not: help in a crisis must not wait for a password."""
    return render(request, "coach/help.html")
