"""The account page."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET


@login_required
@require_GET
def account(request: HttpRequest) -> HttpResponse:
    return render(request, "accounts/account.html")


@login_required
@require_GET
def memories(request: HttpRequest) -> HttpResponse:
    return render(request, "accounts/memories.html")
