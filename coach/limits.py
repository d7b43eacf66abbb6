"""How much one person may ask of the chat at once: counted in Redis, per person, so every
web process shares the count. Each limit is a setting; each refusal says what to do.

While Redis does not answer, each process counts on its own (with a warning in the log):
the limits still hold, per process, rather than failing every request or none."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import defaultdict, deque

import redis

from infra.redis import redis_sync

logger = logging.getLogger(__name__)

_local_lock = threading.Lock()
_local: defaultdict[str, deque[float]] = defaultdict(deque)
_warned_at = 0.0
_redis_down_until = 0.0
WARN_EVERY_SECONDS = 60.0
# After Redis fails to answer, counting stays in the process this long before Redis is
# asked again (a paused Redis would otherwise cost every message its timeout).
RETRY_REDIS_AFTER_SECONDS = 5.0


def within_rate(user_id: int, name: str, *, limit: int, window_seconds: int) -> bool:
    """Count one more of `name`; False (and not counted) when `limit` were already counted
    in the last `window_seconds`. A sliding window: any minute, not the clock's minutes."""
    global _redis_down_until
    key = f"coach:rate:{user_id}:{name}"
    if time.monotonic() >= _redis_down_until:
        try:
            return _within_rate_in_redis(key, limit=limit, window_seconds=window_seconds)
        except redis.RedisError as error:
            _redis_down_until = time.monotonic() + RETRY_REDIS_AFTER_SECONDS
            _warn(error)
    return _within_rate_here(key, limit=limit, window_seconds=window_seconds)


def _within_rate_in_redis(key: str, *, limit: int, window_seconds: int) -> bool:
    now = time.time()
    member = f"{now:.6f}:{uuid.uuid4().hex[:8]}"
    client = redis_sync()
    with client.pipeline(transaction=True) as pipe:
        pipe.zremrangebyscore(key, "-inf", now - window_seconds)
        pipe.zadd(key, {member: now})
        pipe.zcard(key)
        pipe.expire(key, window_seconds)
        _, _, count, _ = pipe.execute()
    if int(count) <= limit:
        return True
    # A refused attempt does not count: waiting out the window is always enough.
    client.zrem(key, member)
    return False


def _within_rate_here(key: str, *, limit: int, window_seconds: int) -> bool:
    now = time.monotonic()
    with _local_lock:
        stamps = _local[key]
        while stamps and stamps[0] <= now - window_seconds:
            stamps.popleft()
        if len(stamps) >= limit:
            return False
        stamps.append(now)
        return True


def _warn(error: redis.RedisError) -> None:
    global _warned_at
    with _local_lock:
        if time.monotonic() - _warned_at < WARN_EVERY_SECONDS:
            return
        _warned_at = time.monotonic()
    logger.warning("Redis does not answer (%s): chat limits are counted per web process until it does", error)
