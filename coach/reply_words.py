"""A reply's words on their way to its stream, with the memory cues between them, and the
person's Stop, which any web process may ask for."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from redis import RedisError

from coach import streams
from coach.claims import Attempt
from coach.turn_life import AttemptLife

logger = logging.getLogger(__name__)

# How often a running turn looks for the person's Stop.
STOP_CHECK_SECONDS = 0.25
# Pieces of the reply arriving closer together than this are written to its stream together.
COALESCE_SECONDS = 0.03


class Stopped(Exception):
    """The person asked the turn to stop."""


class ReplyWords:
    """The reply's words as they arrive, sent on to the stream with the memory cues between
    them; a later round's words start a new paragraph.

    Pieces that come within COALESCE_SECONDS of the last write go out together, a moment
    later: a fast model's burst is one write and one wake-up for each reader, not one per
    token, while the first words of a pause still go out at once."""

    def __init__(self, attempt: Attempt, stop: StopWatch, life: AttemptLife) -> None:
        self._attempt = attempt
        self._message_id = attempt.message_id
        self._stop = stop
        self._life = life
        self._parts: list[str] = []
        self._unsent: list[str] = []
        self._new_round = False
        self._resumed = False
        self._stream_down = False
        self._last_write = 0.0
        # Writes keep their order: a delayed write and the next one never overtake.
        self._lock = asyncio.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._delayed: asyncio.Task[None] | None = None

    async def begin(self) -> None:
        """Take the reply's stream for this attempt: an earlier one writes there no more."""
        try:
            await streams.attempt_begin(self._message_id, self._attempt.stream_holder)
        except RedisError as error:
            self._down(error)

    async def resume(self, text: str) -> None:
        """Open with the words of a part-reply this attempt goes on from: its readers see
        them first, and the model's next words carry on the same paragraph."""
        await self.add(text)
        self._resumed = True

    def next_round(self) -> None:
        if self._resumed:
            self._resumed = False
            return
        self._new_round = bool(self._parts)

    async def add(self, text: str) -> None:
        if self._new_round:
            text, self._new_round = "\n\n" + text.lstrip(), False
        self._parts.append(text)
        self._unsent.append(text)
        wait = self._last_write + COALESCE_SECONDS - time.monotonic()
        if wait <= 0:
            await self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(wait, self._flush_later)

    async def cue(self, change: dict[str, Any]) -> None:
        await self.flush()
        async with self._lock:
            await self._send(streams.MEMORY, change)

    async def flush(self) -> None:
        """Send what is not sent yet."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        async with self._lock:
            if self._unsent:
                text, self._unsent = "".join(self._unsent), []
                self._last_write = time.monotonic()
                await self._send(streams.TEXT, {"text": text})

    async def settle(self) -> None:
        """Before the terminal event: everything written is in the stream, or given up on
        (the terminal event carries the reply whole, and the database has it)."""
        try:
            await self.flush()
        except Exception:
            logger.warning("the last words of message %s could not reach its stream", self._message_id)

    def _flush_later(self) -> None:
        self._timer = None
        self._delayed = asyncio.ensure_future(self.flush())

    async def _send(self, kind: str, data: dict[str, Any]) -> None:
        if self._stream_down:
            return
        try:
            self._stop.seen(
                await streams.words_append(self._message_id, kind, data, attempt=self._attempt.stream_holder)
            )
        except streams.NotHeld:
            # A retry took the stream, or the person was erased: this attempt is over.
            self._stream_down = True
            self._life.lose()
        except RedisError as error:
            self._down(error)

    def _down(self, error: RedisError) -> None:
        # The reply goes on, and is saved whole: readers learn it from the database.
        self._stream_down = True
        logger.warning(
            "message %s: its stream is unreachable (%s); the reply continues unstreamed", self._message_id, error
        )

    @property
    def text(self) -> str:
        return "".join(self._parts)


class StopWatch:
    """Whether the person asked the turn to stop. The Stop may come from any web process:
    it is a flag in Redis, learned with each piece of the reply written (in the same round
    trip), and looked up on its own only when nothing was written for STOP_CHECK_SECONDS."""

    def __init__(self, message_id: int, life: AttemptLife) -> None:
        self._message_id = message_id
        self._life = life
        self._asked = False
        # A Stop needs the turn's stream to show on first, so the first look is a moment in.
        self._seen_at = time.monotonic()

    def seen(self, asked: bool) -> None:
        self._asked = self._asked or asked
        self._seen_at = time.monotonic()

    async def asked(self) -> bool:
        self._life.check()
        if not self._asked and time.monotonic() - self._seen_at >= STOP_CHECK_SECONDS:
            self.seen(await _stop_requested(self._message_id))
        return self._asked


async def _stop_requested(message_id: int) -> bool:
    try:
        return await streams.stop_requested(message_id)
    except RedisError:
        # Without Redis no Stop can be asked for; the reply goes on.
        return False
