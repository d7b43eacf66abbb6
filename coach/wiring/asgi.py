"""ASGI entry point: uvicorn serves the app, so a streaming reply holds no worker.

Before Django sees a request, its body is held to REQUEST_BODY_MAX_BYTES: one that says
it is larger is answered 413 at once, from its headers, its body never read (Django would
first spool all of it to disk); one that does not say (chunked) is read here, up to the
limit, and answered 413 as soon as it runs past it.

Besides HTTP, the app speaks ASGI's lifespan protocol for three things. At startup the
server's loop becomes the one turns run on (coach/runner.py), beside their readers, and
the sweep of dead turns starts beside them (coach/sweep.py). When
the server stops, the replies this process is writing get up to SHUTDOWN_GRACE_SECONDS to
be finished and saved before the process exits. Their readers meanwhile reconnect to
another process, or to this one once it is back, and pick up where they were.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "coach.wiring.settings")

django_application = get_asgi_application()

from infra.log_filters import access_log_without_query_strings  # noqa: E402 (Django is set up above)
from infra.startup import templates_compiled, url_resolvers_filled  # noqa: E402

url_resolvers_filled()
templates_compiled()
# Whatever serves this app (the run command, the image, compose) logs paths, not searches.
access_log_without_query_strings()

logger = logging.getLogger(__name__)

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[Mapping[str, Any]], Awaitable[None]]


async def application(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    if scope["type"] == "http":
        from django.conf import settings

        limit = settings.REQUEST_BODY_MAX_BYTES
        if _declared_length(scope) > limit:
            await _refuse_too_large(send)
            return
        if not _has_header(scope, b"content-length"):
            read = await _body_within(receive, limit)
            if read is None:
                logger.warning("a request body ran past %s bytes without saying so; refused", limit)
                await _refuse_too_large(send)
                return
            receive = read
        receive = _capped(receive, limit)
    await django_application(scope, receive, send)


def _has_header(scope: dict[str, Any], wanted: bytes) -> bool:
    return any(name == wanted for name, _ in scope.get("headers", ()))


async def _body_within(receive: Receive, limit: int) -> Receive | None:
    """A body sent without a length, read whole if it stays within `limit` (None if it runs
    past it): then handed on as one message, and what comes after (a disconnect) as sent."""
    parts: list[bytes] = []
    taken = 0
    first: dict[str, Any] | None = None
    while True:
        message = await receive()
        if message["type"] != "http.request":
            first = message
            break
        body = message.get("body", b"")
        taken += len(body)
        if taken > limit:
            return None
        parts.append(body)
        if not message.get("more_body", False):
            first = {"type": "http.request", "body": b"".join(parts), "more_body": False}
            break
    pending: list[dict[str, Any]] = [first]

    async def replay() -> dict[str, Any]:
        return pending.pop() if pending else await receive()

    return replay


def _declared_length(scope: dict[str, Any]) -> int:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


async def _refuse_too_large(send: Send) -> None:
    from coach.middleware import too_large_text

    body = too_large_text().encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
        # The body is not read, so the connection cannot be used again.
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _capped(receive: Receive, limit: int) -> Receive:
    """A body sent without a length (chunked) past `limit` ends as if the client left."""
    taken = 0

    async def capped() -> dict[str, Any]:
        nonlocal taken
        message = await receive()
        if message["type"] == "http.request":
            taken += len(message.get("body", b""))
            if taken > limit:
                logger.warning("a request body ran past %s bytes without saying so; cut off", limit)
                return {"type": "http.disconnect"}
        return message

    return capped


async def _lifespan(receive: Receive, send: Send) -> None:
    from django.conf import settings

    from coach import runner
    from coach.sweep import sweep_forever

    sweeping: asyncio.Task[None] | None = None
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            runner.serve_on(asyncio.get_running_loop())
            # Its first run fails the turns a dead predecessor of this process left.
            sweeping = asyncio.create_task(sweep_forever())
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            if sweeping is not None:
                sweeping.cancel()
            writing = runner.running()
            if writing:
                logger.info("stopping: waiting for %s replies being written to be saved", writing)
            finished = await asyncio.to_thread(runner.wait_for_running, settings.SHUTDOWN_GRACE_SECONDS)
            if not finished:
                logger.warning(
                    "stopping with %s replies unfinished; the sweeper hands them back to be retried", runner.running()
                )
            runner.serve_on(None)
            await send({"type": "lifespan.shutdown.complete"})
            return
