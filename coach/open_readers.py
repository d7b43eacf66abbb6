"""The readers a person holds open (reply streams and conversation streams, in any tab and
any web process), counted in Redis, so each person may hold COACH_MAX_OPEN_STREAMS."""

from __future__ import annotations

import time
import uuid

from django.conf import settings

from infra.redis import redis_async

# A reader counts as open while it has said so within this (it says so every keep-alive).
READER_ALIVE_SECONDS = 60


def readers_key(user_id: int) -> str:
    return f"coach:readers:{user_id}"


async def reader_open(user_id: int) -> tuple[str, int]:
    """Count a reader of this person's as open: its token, and how many are open now."""
    token = uuid.uuid4().hex
    key, now = readers_key(user_id), time.time()
    async with redis_async().pipeline(transaction=True) as pipe:
        pipe.zremrangebyscore(key, "-inf", now - READER_ALIVE_SECONDS)
        pipe.zadd(key, {token: now})
        pipe.zcard(key)
        pipe.expire(key, READER_ALIVE_SECONDS * 2)
        _, _, open_now, _ = await pipe.execute()
    return token, int(open_now)


async def reader_alive(user_id: int, token: str) -> None:
    await redis_async().zadd(readers_key(user_id), {token: time.time()})


async def reader_close(user_id: int, token: str) -> None:
    await redis_async().zrem(readers_key(user_id), token)


def max_open_readers() -> int:
    return settings.COACH_MAX_OPEN_STREAMS
