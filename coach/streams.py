"""A reply as it is written, in Redis, for any reader in any web process.

Each person's message gets a stream the turn appends to: the words as they come, quiet
memory cues, and one terminal event (done, failed or stopped). A reader (the tab that sent
it, a reload, a second tab, a web process other than the one running the turn) reads the
stream from its start and then blocks for more, so it shows the words so far at once and
follows the rest. Streams are bounded (a reply is a few hundred pieces at most) and expire
a while after their terminal event; the reply itself is in the database by then.

A reader in the process whose turn is writing the reply is handed each piece in that
process as it is written (after it is in Redis, with its id), rather than reading it back
from Redis: one round trip less per piece for most readers. It still reads Redis for
what came before it arrived, so a reload replays the reply from its start.

Beside them: a stream per conversation announcing each new message (so other open tabs
show it), a flag that asks a running turn to stop, and the open readers of each person.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

from redis.typing import EncodableT, FieldT, KeyT, StreamIdT, StreamRangeResponse, XReadResponse

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
# The most events one read of a reply returns.
READ_COUNT = 500


# A stream entry as this app's clients read one (infra/redis.py: decode_responses, the
# default protocol, RESP2): its id and its fields, all text. redis-py's own types cover
# every protocol and decoding at once, and the deleted entries only XCLAIM reports.
type Entry = tuple[str, dict[str, str]]


def entries_of(response: StreamRangeResponse | None) -> list[Entry]:
    """XRANGE or XREVRANGE, as this app's clients read it."""
    return cast("list[Entry]", response)


def _read(response: XReadResponse) -> list[Entry]:
    """XREAD's entries, of every stream it read, as this app's clients read them (RESP2:
    a list of [stream, entries])."""
    return [entry for _, entries in cast("list[tuple[str, list[Entry]]]", response) for entry in entries]


# This process's readers of each reply, and the replies a turn of this process is writing.
_followers: dict[int, set[ReplyFollower]] = {}
_written_here: dict[int, int] = {}
_relay_lock = threading.Lock()


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


def holder_key(message_id: int) -> str:
    """Which attempt at the reply may write its stream: the token of the attempt that holds
    the message, or a mark that the stream was forgotten (a retry, an erasure)."""
    return f"coach:reply:{message_id}:attempt"


def session_key(session_id: int) -> str:
    return f"coach:session:{session_id}:messages"


# The turn's side ----------------------------------------------------------------------------

# One piece into a reply's stream, unless another attempt holds it (or it was forgotten):
# a dead attempt that wakes up late never writes over a live one, nor into an erased
# person's stream. Then whether the person asked the turn to stop. A stream with no holder
# (Redis lost its data) takes any attempt's pieces.
_APPEND_IF_HELD = """
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[1] then return {'', 0} end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', 'kind', ARGV[3], 'data', ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[5])
return {id, redis.call('EXISTS', KEYS[3])}
"""
# What a forgotten stream's holder says, for as long as any attempt could still be running.
FORGOTTEN = "forgotten"


class NotHeld(Exception):
    """The reply's stream belongs to another attempt now (a retry began, or it was erased)."""


async def attempt_begin(message_id: int, attempt: str) -> None:
    """Make `attempt` the one that writes the reply's stream, from its first piece on."""
    await redis_async().set(holder_key(message_id), attempt, ex=UNFINISHED_KEEP_SECONDS)


async def reply_append(message_id: int, kind: str, data: dict[str, Any], *, attempt: str) -> str:
    """Add a reply's terminal event (done, failed or stopped); its stream then expires soon."""
    event_id, _ = await asyncio.shield(_added(message_id, kind, data, attempt=attempt, expire=FINISHED_KEEP_SECONDS))
    return event_id


async def words_append(message_id: int, kind: str, data: dict[str, Any], *, attempt: str) -> bool:
    """Add a piece of a reply being written (never its terminal event), and learn in the same
    round trip whether the person asked its turn to stop. Each piece sets the stream to
    expire in a while, in case its turn dies without a terminal event. NotHeld when another
    attempt holds the stream."""
    _, stop = await asyncio.shield(_added(message_id, kind, data, attempt=attempt, expire=UNFINISHED_KEEP_SECONDS))
    return stop


async def _added(message_id: int, kind: str, data: dict[str, Any], *, attempt: str, expire: int) -> tuple[str, bool]:
    """One event into the reply's stream, then handed to this process's readers. Shielded by
    its callers: a turn cut off while Redis takes the event still hands it over, so a
    reader here never misses what Redis holds."""
    script = redis_async().register_script(_APPEND_IF_HELD)
    event_id, stop = await script(keys=_append_keys(message_id), args=_append_args(attempt, kind, data, expire))
    if not event_id:
        raise NotHeld(message_id)
    _relay(message_id, StreamEvent(id=str(event_id), kind=kind, data=data))
    return str(event_id), bool(stop)


def reply_end_for(message_id: int, attempt: str, kind: str, data: dict[str, Any]) -> bool:
    """From outside the turn (the sweeper, for an attempt whose process died): the reply's
    terminal event, if that attempt still holds its stream. Whether it was added."""
    script = redis_sync().register_script(_APPEND_IF_HELD)
    event_id, _ = script(keys=_append_keys(message_id), args=_append_args(attempt, kind, data, FINISHED_KEEP_SECONDS))
    return bool(event_id)


def _append_keys(message_id: int) -> list[str]:
    return [reply_key(message_id), holder_key(message_id), stop_key(message_id)]


def _append_args(attempt: str, kind: str, data: dict[str, Any], expire: int) -> list[str | int]:
    return [attempt, STREAM_MAX_EVENTS, kind, json.dumps(data), expire]


def words_so_far(message_id: int) -> str:
    """The words a reply's stream holds, before any terminal event: what a turn whose
    process died had written, kept as its cut-off part."""
    words = []
    for _, fields in entries_of(redis_sync().xrange(reply_key(message_id))):
        if fields.get("kind") in TERMINAL:
            break
        if fields.get("kind") == TEXT:
            words.append(json.loads(fields["data"]).get("text", ""))
    return "".join(words)


async def stop_requested(message_id: int) -> bool:
    return bool(await redis_async().exists(stop_key(message_id)))


def stop_request(message_id: int) -> None:
    """Ask the turn answering `message_id` to stop, wherever it runs."""
    redis_sync().set(stop_key(message_id), "1", ex=UNFINISHED_KEEP_SECONDS)


def reply_forget(message_id: int) -> None:
    """Drop a reply's stream and stop flag: a retry writes a new one from its start."""
    replies_forget([message_id])


def replies_forget(message_ids: Iterable[int]) -> None:
    """Drop these replies' streams and stop flags, in one round trip, and mark them
    forgotten: an attempt still running (or a dead one waking up) writes there no more,
    until a new attempt takes the stream (attempt_begin)."""
    ids = list(message_ids)
    if not ids:
        return
    with redis_sync().pipeline(transaction=False) as pipe:
        pipe.delete(*[key for message_id in ids for key in (reply_key(message_id), stop_key(message_id))])
        for message_id in ids:
            pipe.set(holder_key(message_id), FORGOTTEN, ex=UNFINISHED_KEEP_SECONDS)
        pipe.execute()


def session_forget(session_id: int) -> None:
    """Drop a deleted conversation's stream of announced messages."""
    redis_sync().delete(session_key(session_id))


def session_announce(session_id: int, message_id: int, *, again: bool = False) -> None:
    """Tell the conversation's other open tabs that a message was posted, or is being
    answered `again` (retried, regenerated, edited): they show it anew."""
    key = session_key(session_id)
    fields: dict[FieldT, EncodableT] = {"message": str(message_id), **({"again": "1"} if again else {})}
    with redis_sync().pipeline(transaction=False) as pipe:
        pipe.xadd(key, fields, maxlen=SESSION_STREAM_MAX_EVENTS, approximate=True)
        pipe.expire(key, UNFINISHED_KEEP_SECONDS)
        pipe.execute()


@contextmanager
def written_here(message_id: int) -> Iterator[None]:
    """While a turn of this process writes the reply, this process's readers of it are
    handed its pieces here (ReplyFollower), not read back from Redis."""
    with _relay_lock:
        _written_here[message_id] = _written_here.get(message_id, 0) + 1
    try:
        yield
    finally:
        with _relay_lock:
            if _written_here[message_id] == 1:
                del _written_here[message_id]
            else:
                _written_here[message_id] -= 1


# The reader's side --------------------------------------------------------------------------


@dataclass(eq=False)
class ReplyFollower:
    """One reader of a reply, from its first event to its last.

    While a turn of this process writes the reply, the reader waits for pieces handed over
    in the process; otherwise (the turn runs elsewhere, or has not begun) it blocks on
    Redis. It subscribes before it first reads Redis, so a piece written between the two
    is in one or the other, and one seen in both is passed on once (by its id)."""

    message_id: int
    _loop: asyncio.AbstractEventLoop = field(init=False, default_factory=asyncio.get_running_loop)
    _handed: asyncio.Queue[StreamEvent] = field(init=False, default_factory=asyncio.Queue)
    # Whether Redis has been read to its end since subscribing: from then on a piece of
    # this process's turn is in the queue.
    _caught_up: bool = field(init=False, default=False)

    def __enter__(self) -> ReplyFollower:
        with _relay_lock:
            _followers.setdefault(self.message_id, set()).add(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        with _relay_lock:
            followers = _followers.get(self.message_id, set())
            followers.discard(self)
            if not followers:
                _followers.pop(self.message_id, None)

    async def read(self, *, after: str, block_seconds: float) -> list[StreamEvent]:
        """Events after `after` ("0" for the start), waiting up to `block_seconds` for the next."""
        with _relay_lock:
            here = self.message_id in _written_here
        if not here or not self._caught_up:
            # What came before this reader subscribed is only in Redis, so Redis first.
            events = await reply_read(self.message_id, after=after, block_seconds=0 if here else block_seconds)
            self._caught_up = len(events) < READ_COUNT
            if events or not here:
                return events
        handed = self._handed_after(after)
        if handed:
            return handed
        try:
            async with asyncio.timeout(block_seconds):
                first = await self._handed.get()
                # A piece Redis gave this reader already may still be on its way over.
                while _order(first.id) <= _order(after):
                    first = await self._handed.get()
        except TimeoutError:
            # Quiet for a while: anything in Redis that was not handed over is read from there.
            events = await reply_read(self.message_id, after=after, block_seconds=0)
            self._caught_up = len(events) < READ_COUNT
            return events
        return [first, *self._handed_after(after)]

    def hand(self, event: StreamEvent) -> None:
        """Pass on a piece just written, from the loop of the turn that wrote it."""
        try:
            same_loop = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            same_loop = False
        if same_loop:
            self._handed.put_nowait(event)
        else:
            self._loop.call_soon_threadsafe(self._handed.put_nowait, event)

    def _handed_after(self, after: str) -> list[StreamEvent]:
        events = []
        while not self._handed.empty():
            event = self._handed.get_nowait()
            if _order(event.id) > _order(after):
                events.append(event)
        return events


async def reply_read(message_id: int, *, after: str, block_seconds: float) -> list[StreamEvent]:
    """Events after `after` ("0" for the start) in Redis, waiting up to `block_seconds` for
    the next (0: not at all)."""
    stream: dict[KeyT, StreamIdT] = {reply_key(message_id): after}
    if block_seconds <= 0:
        replies = await redis_async().xread(stream, count=READ_COUNT)
    else:
        replies = await redis_async().xread(stream, count=READ_COUNT, block=max(1, int(block_seconds * 1000)))
    return [_event(entry_id, fields) for entry_id, fields in _read(replies)]


@dataclass(frozen=True)
class Announced:
    """A message posted in a conversation, or answered again."""

    event_id: str
    message_id: int
    again: bool


async def session_read(session_id: int, *, after: str, block_seconds: float) -> list[Announced]:
    """The messages posted (or answered again) in the conversation after `after` ("$": from now)."""
    stream: dict[KeyT, StreamIdT] = {session_key(session_id): after}
    replies = await redis_async().xread(stream, count=50, block=int(block_seconds * 1000))
    return [
        Announced(str(entry_id), int(fields["message"]), fields.get("again") == "1")
        for entry_id, fields in _read(replies)
    ]


async def session_latest(session_id: int) -> str:
    """The id of the conversation's newest announcement, to read what comes after it."""
    newest = entries_of(await redis_async().xrevrange(session_key(session_id), count=1))
    return str(newest[0][0]) if newest else "0"


def _relay(message_id: int, event: StreamEvent) -> None:
    with _relay_lock:
        followers = list(_followers.get(message_id, ()))
    for follower in followers:
        follower.hand(event)


def _order(event_id: str) -> tuple[int, int]:
    """A stream id ("milliseconds-sequence", or "0" for the start) as something to compare."""
    milliseconds, _, sequence = event_id.partition("-")
    try:
        return int(milliseconds), int(sequence or 0)
    except ValueError:
        return 0, 0


def _event(entry_id: str, fields: dict[str, str]) -> StreamEvent:
    return StreamEvent(id=str(entry_id), kind=fields["kind"], data=json.loads(fields["data"]))
