"""Where turns run: an event loop that lives as long as the web process.

A turn starts when its message is posted, whether or not a browser ever listens, and must
not depend on the request that posted it: a request's loop (the test client's, or a sync
view's) may end with the request. Under the ASGI server, turns run on the server's own
loop, adopted at startup (coach/wiring/asgi.py): the turn and the readers following it then
share one loop, and a piece written wakes its readers here without crossing threads.
Anywhere else (a server without the lifespan protocol, a worker, the test client) they
run on a loop of their own in a thread. Either way they report through Redis
(coach/streams.py), where any reader in any process finds them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Coroutine
from typing import Any

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_server_loop: asyncio.AbstractEventLoop | None = None
_running: set[concurrent.futures.Future[Any]] = set()


def run_in_background(work: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
    """Run `work` on the turns' loop; returns at once. The future is kept until it ends."""
    future = asyncio.run_coroutine_threadsafe(work, _turn_loop())
    with _lock:
        _running.add(future)
    future.add_done_callback(_finished)
    return future


def serve_on(loop: asyncio.AbstractEventLoop | None) -> None:
    """Run turns started from now on `loop` (the server's, at its startup); None once that
    loop is about to stop, so later turns never wait on a loop that no longer runs."""
    global _server_loop
    with _lock:
        _server_loop = loop


def running() -> int:
    """How many turns this process is running now."""
    with _lock:
        return len(_running)


def wait_for_running(timeout: float) -> bool:
    """Wait up to `timeout` seconds for the turns in flight to end; whether they all did."""
    with _lock:
        futures = list(_running)
    _done, pending = concurrent.futures.wait(futures, timeout=timeout)
    return not pending


def _finished(future: concurrent.futures.Future[Any]) -> None:
    with _lock:
        _running.discard(future)
    if not future.cancelled() and (error := future.exception()) is not None:
        # A turn handles its own failures; anything reaching here is a bug worth a trace.
        logger.error("a background turn ended with an error", exc_info=error)


def _turn_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _server_loop is not None and not _server_loop.is_closed():
            return _server_loop
        if _loop is None or _loop.is_closed():
            _loop = asyncio.new_event_loop()
            thread = threading.Thread(target=_loop.run_forever, name="turns", daemon=True)
            thread.start()
        return _loop
