"""How much one person may ask of the chat at once: counted in Redis, per person, so every
web process shares the count. Each limit is a setting; each refusal says what to do."""

from __future__ import annotations

import time
import uuid

from infra.redis import redis_sync


def within_rate(user_id: int, name: str, *, limit: int, window_seconds: int) -> bool:
    """Count one more of `name`; False (and not counted) when `limit` were already counted
    in the last `window_seconds`. A sliding window: any minute, not the clock's minutes."""
    key = f"coach:rate:{user_id}:{name}"
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
