"""A reply as it is written, in Redis, for any reader in any web process.

Each person's message gets a stream the turn appends to: the words as they come, quiet
memory cues, and one terminal event (done, failed or stopped). A reader (the tab that sent
it, a reload, a second tab, a web process other than the one running the turn) reads the
stream from its start and then blocks for more, so it shows the words so far at once and
follows the rest. Streams are bounded (a reply is a few hundred pieces at most) and expire
a while after their terminal event; the reply itself is in the database by then.

Beside them: a stream per conversation announcing each new message (so other open tabs
show it), a flag that asks a running turn to stop, and the open readers of each person.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from infra.redis import redis_async, redis_sync

TEXT, MEMORY = "text", "memory"
DONE, FAILED, STOPPED = "done", "failed", "stopped"
TERMINAL = frozenset({DONE, FAILED, STOPPED})
# More pieces than any reply within COACH_MAX_TOKENS is written in; the oldest would go first.
STREAM_MAX_EVENTS = 5000
# How long a finished reply's stream stays readable: a reload just after still replays it.
FINISHED_KEEP_SECONDS = 300
# A stream whose turn died (no terminal event) expires anyway, after this.
UNFINISHED_KEEP_SECONDS = 3600
SESSION_STREAM_MAX_EVENTS = 200
# A reader counts as open while it has said so within this (it says so every keep-alive).
READER_ALIVE_SECONDS = 60


@dataclass(frozen=True)
class StreamEvent:
    id: str
    kind: str
    data: dict[str, Any]

    @property
    def terminal(self) -> bool:
        return self.kind in TERMINAL


def reply_key(message_id: int) -> str:
    return f"coach:reply:{message_id}"


def stop_key(message_id: int) -> str:
    return f"coach:reply:{message_id}:stop"


def session_key(session_id: int) -> str:
    return f"coach:session:{session_id}:messages"


def readers_key(user_id: int) -> str:
    return f"coach:readers:{user_id}"


# The turn's side ----------------------------------------------------------------------------


async def reply_append(message_id: int, kind: str, data: dict[str, Any]) -> str:
    """Add a reply's terminal event (done, failed or stopped); its stream then expires soon."""
    key = reply_key(message_id)
    async with redis_async().pipeline(transaction=False) as pipe:
        pipe.xadd(key, {"kind": kind, "data": json.dumps(data)}, maxlen=STREAM_MAX_EVENTS, approximate=True)
        pipe.expire(key, FINISHED_KEEP_SECONDS)
        event_id, _ = await pipe.execute()
    return str(event_id)


async def words_append(message_id: int, kind: str, data: dict[str, Any], *, first: bool = False) -> bool:
    """Add a piece of a reply being written (never its terminal event), and learn in the same
    round trip whether the person asked its turn to stop. The first piece sets the stream to
    expire in a while, in case its turn dies without a terminal event."""
    key = reply_key(message_id)
    async with redis_async().pipeline(transaction=False) as pipe:
        pipe.xadd(key, {"kind": kind, "data": json.dumps(data)}, maxlen=STREAM_MAX_EVENTS, approximate=True)
        if first:
            pipe.expire(key, UNFINISHED_KEEP_SECONDS)
        pipe.exists(stop_key(message_id))
        *_, stop = await pipe.execute()
    return bool(stop)


async def stop_requested(message_id: int) -> bool:
    return bool(await redis_async().exists(stop_key(message_id)))


def stop_request(message_id: int) -> None:
    """Ask the turn answering `message_id` to stop, wherever it runs."""
    redis_sync().set(stop_key(message_id), "1", ex=UNFINISHED_KEEP_SECONDS)


def reply_forget(message_id: int) -> None:
    """Drop a reply's stream and stop flag: a retry writes a new one from its start."""
    redis_sync().delete(reply_key(message_id), stop_key(message_id))


def session_announce(session_id: int, message_id: int) -> None:
    """Tell the conversation's other open tabs that a message was posted."""
    key = session_key(session_id)
    with redis_sync().pipeline(transaction=False) as pipe:
        pipe.xadd(key, {"message": str(message_id)}, maxlen=SESSION_STREAM_MAX_EVENTS, approximate=True)
        pipe.expire(key, UNFINISHED_KEEP_SECONDS)
        pipe.execute()


# The reader's side --------------------------------------------------------------------------


async def reply_read(message_id: int, *, after: str, block_seconds: float) -> list[StreamEvent]:
    """Events after `after` ("0" for the start), waiting up to `block_seconds` for the next."""
    replies = await redis_async().xread(
        {reply_key(message_id): after}, count=500, block=max(1, int(block_seconds * 1000))
    )
    return [_event(entry_id, fields) for _, entries in replies for entry_id, fields in entries]


async def session_read(session_id: int, *, after: str, block_seconds: float) -> list[tuple[str, int]]:
    """(event id, message id) of messages posted in the conversation after `after` ("$": from now)."""
    replies = await redis_async().xread({session_key(session_id): after}, count=50, block=int(block_seconds * 1000))
    return [(str(entry_id), int(fields["message"])) for _, entries in replies for entry_id, fields in entries]


async def session_latest(session_id: int) -> str:
    """The id of the conversation's newest announcement, to read what comes after it."""
    newest = await redis_async().xrevrange(session_key(session_id), count=1)
    return str(newest[0][0]) if newest else "0"


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


def _event(entry_id: str, fields: dict[str, str]) -> StreamEvent:
    return StreamEvent(id=str(entry_id), kind=fields["kind"], data=json.loads(fields["data"]))


def max_open_readers() -> int:
    return settings.COACH_MAX_OPEN_STREAMS
