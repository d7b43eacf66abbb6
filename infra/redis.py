"""Redis for app code, beside the cache and the Celery broker that use it on their own.

An async client per event loop (a connection pool belongs to the loop it runs on), and a
sync client per process; both on REDIS_URL, with short timeouts, so a Redis that does not
answer fails a call in seconds rather than hanging it.

The async pool is sized for the connections the web process takes at once
(WEB_MAX_CONNECTIONS, its server's limit too: coach/wiring/web_server.py): each may be a reader
blocked on its reply's stream while the turn it started writes that reply, so a reply is
never unstreamed for want of the app's own connections (redis-py's default is 100).
"""

from __future__ import annotations

import asyncio
import weakref
from functools import lru_cache
from typing import TypedDict

import redis
import redis.asyncio
from django.conf import settings
from redis.driver_info import DriverInfo

# Named once: left to itself, redis-py looks its own version up in the installed packages'
# metadata (a directory scan) for every new connection, and each open stream takes one.
DRIVER = DriverInfo(lib_version=redis.__version__)

# A reader's blocking read, and the turn writing the reply it follows.
CONNECTIONS_PER_WEB_CONNECTION = 2
# Beside them: the process's own sweeps and checks.
SPARE_CONNECTIONS = 10
SOCKET_TIMEOUT_SECONDS = 5.0
CONNECT_TIMEOUT_SECONDS = 2.0
# Sync calls are all quick ones, made while a request waits: a Redis that takes longer is down.
SYNC_TIMEOUT_SECONDS = 1.0

_async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, redis.asyncio.Redis]] = (
    weakref.WeakKeyDictionary()
)


def redis_async() -> redis.asyncio.Redis:
    """The client for the running event loop. Blocking reads ask for less than the socket
    timeout, so they never reach it."""
    clients = _async_clients.setdefault(asyncio.get_running_loop(), {})
    url = settings.REDIS_URL
    if url not in clients:
        clients[url] = redis.asyncio.Redis.from_url(url, max_connections=async_pool_size(), **_OPTIONS)
    return clients[url]


def async_pool_size() -> int:
    """How many connections to Redis a web process's event loop may hold at once."""
    return CONNECTIONS_PER_WEB_CONNECTION * settings.WEB_MAX_CONNECTIONS + SPARE_CONNECTIONS


def redis_sync() -> redis.Redis:
    """The client for sync code (views, tasks, services)."""
    return _sync_client(settings.REDIS_URL)


class _Options(TypedDict):
    decode_responses: bool
    socket_connect_timeout: float
    socket_timeout: float
    health_check_interval: int
    driver_info: DriverInfo


_OPTIONS: _Options = {
    "decode_responses": True,
    "socket_connect_timeout": CONNECT_TIMEOUT_SECONDS,
    "socket_timeout": SOCKET_TIMEOUT_SECONDS,
    "health_check_interval": 30,
    "driver_info": DRIVER,
}


@lru_cache(maxsize=4)
def _sync_client(url: str) -> redis.Redis:
    options: _Options = {
        **_OPTIONS,
        "socket_timeout": SYNC_TIMEOUT_SECONDS,
        "socket_connect_timeout": SYNC_TIMEOUT_SECONDS,
    }
    return redis.Redis.from_url(url, **options)
