"""ASGI entry point: uvicorn serves the app, so a streaming reply holds no worker.

Besides HTTP, the app speaks ASGI's lifespan protocol for one thing: when the server
stops, the replies this process is writing (on the turns' own loop, coach/runner.py) get
up to SHUTDOWN_GRACE_SECONDS to be finished and saved before the process exits. Their
readers meanwhile reconnect to another process, or to this one once it is back, and pick
up where they were.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "coach.settings")

django_application = get_asgi_application()

logger = logging.getLogger(__name__)

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def application(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    await django_application(scope, receive, send)


async def _lifespan(receive: Receive, send: Send) -> None:
    from django.conf import settings

    from coach import runner

    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            writing = runner.running()
            if writing:
                logger.info("stopping: waiting for %s replies being written to be saved", writing)
            finished = await asyncio.to_thread(runner.wait_for_running, settings.SHUTDOWN_GRACE_SECONDS)
            if not finished:
                logger.warning(
                    "stopping with %s replies unfinished; the sweeper hands them back to be retried", runner.running()
                )
            await send({"type": "lifespan.shutdown.complete"})
            return
