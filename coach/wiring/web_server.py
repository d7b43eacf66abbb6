"""The web server's command line, one for the run command, the image and compose alike:
uvicorn serving coach.wiring.asgi, in WEB_PROCESSES processes (the machine's cores unless set),
each taking at most WEB_MAX_CONNECTIONS connections at once (past them it answers 503
rather than hold every trickling client open). The same number sizes each process's Redis
pool (infra/redis.py), so no reply is ever unstreamed for want of the app's own
connections to Redis.

    python -m coach.wiring.web_server --host 0.0.0.0 --port 8000 [more of uvicorn's flags]

A turn runs in whichever process took its message, and any process serves any reader of
any reply: what they share is in PostgreSQL and Redis.
"""

from __future__ import annotations

import os
import sys

from infra.environment import env_int

DEFAULT_MAX_CONNECTIONS = 1000
# The web process cuts its readers after this on stopping (their browsers reconnect), then
# waits up to SHUTDOWN_GRACE_SECONDS for the replies it is writing.
READERS_GRACE_SECONDS = 5


def web_processes() -> int:
    """How many web processes serve: WEB_PROCESSES, or one per core this process may run on
    (a container's share, where it is given cores of its own)."""
    return max(1, env_int("WEB_PROCESSES", default=len(os.sched_getaffinity(0))))


def web_max_connections() -> int:
    """The most connections (and so requests, streams included) one web process takes at once."""
    return max(1, env_int("WEB_MAX_CONNECTIONS", default=DEFAULT_MAX_CONNECTIONS))


def web_server_argv(*flags: str) -> list[str]:
    """uvicorn's command line, with `flags` (the address, the proxy's headers) after the
    settings above."""
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "coach.wiring.asgi:application",
        "--workers",
        str(web_processes()),
        "--limit-concurrency",
        str(web_max_connections()),
        "--timeout-graceful-shutdown",
        str(READERS_GRACE_SECONDS),
        *flags,
    ]


if __name__ == "__main__":
    argv = web_server_argv(*sys.argv[1:])
    # Becomes uvicorn: the signals a supervisor or a container runtime sends reach it.
    os.execv(argv[0], argv)  # noqa: S606
