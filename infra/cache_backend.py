"""The cache backend: Redis, and while Redis does not answer, this process's own memory.

Sign-in's rate limits (allauth's) live in the cache. Without a fallback a Redis outage
makes every sign-in a 500; failing open would drop the limits silently. So a call that
Redis does not answer within its short timeout is served by a per-process cache instead,
with a warning in the log, and for a few seconds after that Redis is not asked at all
(a paused Redis would otherwise cost every call its timeout). The limits then hold within
each process, and Redis is tried again on its own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import redis
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache

logger = logging.getLogger(__name__)

# After Redis fails to answer, the process's own cache serves for this long before Redis
# is asked again.
RETRY_REDIS_AFTER_SECONDS = 5.0
FALLBACK_MAX_ENTRIES = 10_000


class RedisCacheWithFallback(RedisCache):
    def __init__(self, server: str, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._fallback = LocMemCache(
            f"redis-fallback-{id(self)}",
            {"TIMEOUT": params.get("TIMEOUT", 300), "OPTIONS": {"MAX_ENTRIES": FALLBACK_MAX_ENTRIES}},
        )
        self._redis_down_until = 0.0
        self._lock = threading.Lock()

    def _either(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if time.monotonic() >= self._redis_down_until:
            try:
                return getattr(super(), name)(*args, **kwargs)
            except redis.RedisError as error:
                self._redis_down(error)
        return getattr(self._fallback, name)(*args, **kwargs)

    def _redis_down(self, error: redis.RedisError) -> None:
        with self._lock:
            first = time.monotonic() >= self._redis_down_until
            self._redis_down_until = time.monotonic() + RETRY_REDIS_AFTER_SECONDS
        if first:
            logger.warning(
                "Redis does not answer (%s): the cache, and the sign-in rate limits in it, use this "
                "process's memory until it does",
                error,
            )


def _either_way(name: str) -> Callable[..., Any]:
    def method(self: RedisCacheWithFallback, *args: Any, **kwargs: Any) -> Any:
        return self._either(name, *args, **kwargs)

    method.__name__ = name
    return method


# Every call that reaches Redis goes through _either; the rest of Django's cache API
# (get_or_set, decr, the async methods) is built on these.
THROUGH_EITHER = [
    "get",
    "set",
    "add",
    "touch",
    "delete",
    "get_many",
    "set_many",
    "delete_many",
    "has_key",
    "incr",
    "clear",
]
for _name in THROUGH_EITHER:
    setattr(RedisCacheWithFallback, _name, _either_way(_name))
