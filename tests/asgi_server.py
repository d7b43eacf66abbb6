"""The app over real ASGI (uvicorn) inside the test process, for Chromium to use.

Django's live_server speaks WSGI, which would buffer a streamed reply whole; users meet
the app through uvicorn, so the browser tests do too. Same process, so the test database,
settings overrides, the mail outbox and the scripted model server all apply.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

from coach.wiring.asgi import application
from tests.processes import free_port

START_TIMEOUT_SECONDS = 10


@contextmanager
def asgi_app_server(*, access_log: bool = False) -> Iterator[str]:
    """The app served on a free port. With `access_log`, uvicorn logs each request to the
    `uvicorn.access` logger, as it does in production, for a test to read."""
    port = free_port()
    config = uvicorn.Config(
        # The app's own entry point (its body limit included), static files served beside it.
        ASGIStaticFilesHandler(application),
        host="127.0.0.1",
        port=port,
        log_level="info" if access_log else "warning",
        access_log=access_log,
        # None leaves the test's own logging (and its handlers) in place.
        log_config=None,
        # As production runs it: turns run on the server's own loop, beside their readers.
        lifespan="on",
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="asgi-live-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the in-process ASGI server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
