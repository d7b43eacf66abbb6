"""Whether the app can serve: for load balancers and the run command."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from infra.health import database_problem, redis_problem


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
