"""The chat pages and the health check."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from coach.health import database_problem, redis_problem


@login_required
def chat(request: HttpRequest) -> HttpResponse:
    return render(request, "coach/chat.html")


@require_GET
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    """200 when PostgreSQL and Redis answer; 503 naming each one that does not."""
    problems = {
        name: problem
        for name, problem in (("database", database_problem()), ("redis", redis_problem(settings.REDIS_URL)))
        if problem
    }
    if problems:
        return JsonResponse({"status": "unavailable", "failing": problems}, status=503)
    return JsonResponse({"status": "ok"})
