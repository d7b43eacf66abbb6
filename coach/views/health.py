"""Whether the app can serve: for load balancers and the run command.

/healthz (ready): PostgreSQL and Redis answer, within HEALTH_DEADLINE_SECONDS whatever
hangs (each on a thread of its own, so one hanging is never blamed on the other), and the
database takes writes. /livez (alive): the process answers requests at all; a load
balancer restarts on this one, and stops sending traffic on the other.
"""

from __future__ import annotations

from functools import partial

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from infra.health import database_problem, problems_within, redis_problem

# Under the 2 s a load balancer's check commonly allows, with room for the response.
HEALTH_DEADLINE_SECONDS = 1.5


@require_GET
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    """200 when PostgreSQL and Redis answer; 503 naming each one that failed, is slow, or
    (the database) refuses writes."""
    problems = problems_within(
        {"database": database_problem, "redis": partial(redis_problem, settings.REDIS_URL)},
        HEALTH_DEADLINE_SECONDS,
    )
    if problems:
        return JsonResponse({"status": "unavailable", "failing": problems}, status=503)
    return JsonResponse({"status": "ok"})


@require_GET
@never_cache
def livez(request: HttpRequest) -> JsonResponse:
    """200 while the process serves requests; nothing else is asked."""
    return JsonResponse({"status": "alive"})
