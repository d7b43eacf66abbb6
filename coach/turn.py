"""One chat turn: from a person's message, posted, to a reply saved, whatever happens.

The turn starts when the message is posted, on the loop turns run on (coach/runner.py),
whether or not a browser ever listens. It claims the message and assembles what the model
is sent in one transaction; streams the model's answer with the memory tools offered; applies
their calls in order between rounds, for at most COACH_MAX_TOOL_ROUNDS rounds (then it must
answer in words), and no further round when a response held its words and every write it
asked for was done; and saves the reply when whole. Every piece goes to the reply's Redis
stream (coach/streams.py) as it comes, where any reader follows it: the words, and a quiet
cue for each memory saved, changed or suggested (the memory work never shows in the words).
A turn that does not use memory (memory off, or a conversation not remembered) offers no
tools; a tool call the model makes anyway is answered "memory is off" and changes nothing.

Every exit ends with one terminal event and state: done (the reply saved), stopped (the
person stopped it; what was written is kept), or failed (retryable; a part-reply kept,
marked interrupted), whatever the database or Redis does at that moment: a finishing step
the database refuses for a moment is tried again for a few seconds, and the terminal
event goes out regardless. A turn never runs past COACH_TURN_DEADLINE_SECONDS. It is one
attempt at an answer (coach/claims.py): it beats every COACH_TURN_HEARTBEAT_SECONDS, so one
whose process died is failed by the sweep within seconds, and it ends at once when it
learns another attempt holds the message. No database connection is held while the model
writes: each database step borrows one from the pool and gives it back.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.utils import timezone
from redis import RedisError

from coach import streams
from coach.claims import (
    FAILED_FOR_GOOD,
    FAILED_RETRYABLE,
    FAILED_TOO_SLOW,
    Attempt,
    BegunTurn,
    ReplyTokens,
    TurnLost,
    reply_fail,
    reply_of,
    reply_save,
    reply_stop,
    turn_begin,
    turn_heartbeat,
    turn_not_begun,
)
from coach.rendering import render_reply
from coach.runner import run_in_background
from infra import llm
from infra.dbsteps import db_step
from infra.llm import LLMError, ModelResponse, TextDelta
from infra.tokens import estimate_tokens
from memory.tool_schemas import tool_definitions
from memory.tools import ToolContext, run_tool, settles

if TYPE_CHECKING:
    from coach.models import Message

logger = logging.getLogger(__name__)

# How often a running turn looks for the person's Stop.
STOP_CHECK_SECONDS = 0.25
# Pieces of the reply arriving closer together than this are written to its stream together.
COALESCE_SECONDS = 0.03
# A finishing step the database refused (a connection lost, a restart under way) is tried
# again after each of these pauses before the turn gives up on recording its outcome.
FINISH_RETRY_PAUSES_SECONDS = (0.25, 0.5, 1.0, 2.0, 4.0)


class _Stopped(Exception):
    """The person asked the turn to stop."""


class _TooSlow(TimeoutError):
    """The model did not start answering in time."""


# The turns this process has started, by message, until each ends.
_started: dict[int, concurrent.futures.Future[None]] = {}
_started_lock = threading.Lock()


def turn_start(*, user_id: int, message_id: int) -> concurrent.futures.Future[None]:
    """Answer the message in the background; returns at once. If another turn already holds
    the message (a reload, a second process), this one does nothing."""
    future = run_in_background(turn_run(user_id=user_id, message_id=message_id))
    with _started_lock:
        _started[message_id] = future
    future.add_done_callback(lambda done: _forget_started(message_id, done))
    return future


def turn_start_unless_started(*, user_id: int, message_id: int) -> concurrent.futures.Future[None]:
    """For a reader who finds its message still waiting: a turn this process started for it
    a moment ago (the post that wrote it) is simply about to claim it, and a second would
    only lose the claim, at the cost of a database step. Any other process's reader, or
    one whose posting process died, starts one; the claim lets only one answer."""
    with _started_lock:
        started = _started.get(message_id)
    if started is not None and not started.done():
        return started
    return turn_start(user_id=user_id, message_id=message_id)


def _forget_started(message_id: int, done: concurrent.futures.Future[None]) -> None:
    with _started_lock:
        if _started.get(message_id) is done:
            del _started[message_id]


async def turn_run(*, user_id: int, message_id: int) -> None:
    try:
        # Tried again while the database is away for a moment: an undone claim is harmless.
        begun = await _finishing(turn_begin, user_id=user_id, message_id=message_id, now=timezone.now())
    except Exception:
        # Its claim was undone with the transaction: no attempt holds the message, so its
        # readers learn the failure from the database.
        logger.exception("turn for message %s could not begin", message_id)
        await _recorded(turn_not_begun, message_id=message_id, error="could not prepare the turn")
        return
    if begun is None:
        return
    with streams.written_here(message_id):
        await _answer(begun)


async def _answer(begun: BegunTurn) -> None:
    attempt, message = begun.attempt, begun.message
    life = _Life(attempt)
    stop = _StopWatch(message.pk, life)
    words = _Words(attempt, stop, life)
    usage = _Usage()
    context = ToolContext(
        user=begun.user,
        time_zone=begun.user.time_zone,
        remembers=begun.conversation.remembers,
        session_id=message.session_id,
        message_id=message.pk,
    )
    await words.begin()
    async with life.beating():
        try:
            async with asyncio.timeout(settings.COACH_TURN_DEADLINE_SECONDS):
                try:
                    await _converse(context, begun.conversation.messages, words, usage, stop, life)
                finally:
                    await words.settle()
            if not words.text.strip():
                raise LLMError("the model answered with no words", retryable=True)
            life.finishing()
            reply = await _reply_saved(attempt, words.text.strip(), usage.tokens())
        except _Stopped:
            life.finishing()
            if not await _recorded(reply_stop, attempt=attempt, partial_text=words.text):
                logger.warning("the stop of message %s could not be recorded; the sweep fails it", message.pk)
            html = render_reply(words.text) if words.text.strip() else ""
            await _append(attempt, streams.STOPPED, {"html": html})
        except TimeoutError as error:
            why = str(error) or "the turn passed its deadline"
            logger.warning("turn for message %s: %s", message.pk, why)
            await _fail(attempt, life, error=why, shown=FAILED_TOO_SLOW, partial=words.text)
        except LLMError as error:
            logger.warning("turn for message %s failed: %s", message.pk, error)
            shown = FAILED_RETRYABLE if error.retryable else FAILED_FOR_GOOD
            await _fail(attempt, life, error=str(error), shown=shown, partial=words.text)
        except (OperationalError, InterfaceError) as error:
            # The database was away past every retry: try again once it is back.
            logger.warning("turn for message %s could not be saved: %s", message.pk, error)
            await _fail(attempt, life, error="the database was unavailable", shown=FAILED_RETRYABLE, partial=words.text)
        except (TurnLost, _Lost):
            # Swept, retried or erased meanwhile: its outcome is another's to tell.
            logger.warning("turn for message %s lost its claim; it ends without a word", message.pk)
        except Exception:
            # Whatever broke, the person's message must not be left "being answered" forever.
            logger.exception("turn for message %s broke", message.pk)
            await _fail(attempt, life, error="internal error", shown=FAILED_FOR_GOOD, partial=words.text)
        else:
            await _append(attempt, streams.DONE, {"html": render_reply(reply.content)})


class _Lost(Exception):
    """The attempt learnt that it no longer holds its message (its heartbeat was refused,
    or its stream belongs to another attempt)."""


class _Life:
    """The attempt's heartbeat, every COACH_TURN_HEARTBEAT_SECONDS while it runs. A beat the
    database refuses is simply missed (the sweep allows for an outage); a beat that finds
    the message held by no one, or by another attempt, means this one was given up on: it
    is cancelled at once, whatever it waits for, and ends as lost."""

    def __init__(self, attempt: Attempt) -> None:
        self.attempt = attempt
        self.lost = False
        self._task: asyncio.Task[Any] | None = None
        self._cancelled = False
        self._finishing = False

    @contextlib.asynccontextmanager
    async def beating(self) -> AsyncIterator[None]:
        self._task = asyncio.current_task()
        beats = asyncio.create_task(self._beat())
        try:
            yield
        except asyncio.CancelledError:
            if not self._cancelled:
                raise
            # Our own cancellation, for a lost attempt: it ends here, not the task.
            self._task.uncancel()
            logger.warning("turn for message %s was given up on; it stops", self.attempt.message_id)
        finally:
            beats.cancel()

    def lose(self) -> None:
        """Known lost from within the turn: it stops at its next step (self.check)."""
        self.lost = True

    def finishing(self) -> None:
        """The turn is recording its own end: a beat that finds the message no longer
        being answered has met that end, not another attempt's."""
        self._finishing = True

    def check(self) -> None:
        if self.lost:
            raise _Lost(self.attempt.message_id)

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(settings.COACH_TURN_HEARTBEAT_SECONDS)
            try:
                held = await db_step(turn_heartbeat, attempt=self.attempt)
            except Exception as error:
                logger.warning("message %s: a heartbeat was missed (%s)", self.attempt.message_id, error)
                continue
            if not held:
                if self._finishing:
                    return
                # Whatever the turn waits for (the model's first words, a tool call), it
                # stops now: cancelled from this task, never from its own.
                self.lost = self._cancelled = True
                if self._task is not None:
                    self._task.cancel()
                return


async def _reply_saved(attempt: Attempt, text: str, tokens: ReplyTokens) -> Message:
    try:
        return await _finishing(reply_save, attempt=attempt, text=text, tokens=tokens)
    except TurnLost:
        # A save that went through as its connection dropped, then tried again, finds the
        # message answered: by this very attempt, if its reply is there.
        saved = await db_step(reply_of, attempt=attempt)
        if saved is None:
            raise
        return saved


async def _finishing[R](step: Callable[..., R], **kwargs: Any) -> R:
    """A step that begins the turn or records how it ended, tried again while the database
    is away for a moment (a connection lost, a restart under way)."""
    for pause in (*FINISH_RETRY_PAUSES_SECONDS, None):
        try:
            return await db_step(step, **kwargs)
        except (OperationalError, InterfaceError) as error:
            if pause is None:
                raise
            logger.warning("recording a turn's end failed (%s); trying again in %s s", error, pause)
            await asyncio.sleep(pause)
    raise AssertionError("unreachable")


async def _recorded(step: Callable[..., bool], **kwargs: Any) -> bool:
    """A finishing step whose failure the turn outlives: whether it was recorded."""
    try:
        return await _finishing(step, **kwargs)
    except Exception:
        logger.exception("a turn's end could not be recorded (%s)", getattr(step, "__name__", step))
        return False


class _Words:
    """The reply's words as they arrive, sent on to the stream with the memory cues between
    them; a later round's words start a new paragraph.

    Pieces that come within COALESCE_SECONDS of the last write go out together, a moment
    later: a fast model's burst is one write and one wake-up for each reader, not one per
    token, while the first words of a pause still go out at once."""

    def __init__(self, attempt: Attempt, stop: _StopWatch, life: _Life) -> None:
        self._attempt = attempt
        self._message_id = attempt.message_id
        self._stop = stop
        self._life = life
        self._parts: list[str] = []
        self._unsent: list[str] = []
        self._new_round = False
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

    def next_round(self) -> None:
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


class _StopWatch:
    """Whether the person asked the turn to stop. The Stop may come from any web process:
    it is a flag in Redis, learned with each piece of the reply written (in the same round
    trip), and looked up on its own only when nothing was written for STOP_CHECK_SECONDS."""

    def __init__(self, message_id: int, life: _Life) -> None:
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


class _Usage:
    """The tokens of a turn, summed over its model rounds: the provider's counts where it
    sent them, an estimate from the characters sent and received where it did not."""

    def __init__(self) -> None:
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.estimated = False

    def add(self, response: ModelResponse, sent: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> None:
        if response.usage is not None:
            self.prompt_tokens += response.usage.prompt_tokens
            self.completion_tokens += response.usage.completion_tokens
            return
        self.estimated = True
        # As sent on the wire, but with letters left as letters (escapes would inflate the count).
        wire = json.dumps(sent, ensure_ascii=False) + json.dumps(tools or [], ensure_ascii=False)
        self.prompt_tokens += estimate_tokens(wire)
        answered = response.text + "".join(call.name + call.arguments for call in response.tool_calls)
        self.completion_tokens += estimate_tokens(answered)

    def tokens(self) -> ReplyTokens:
        return ReplyTokens(prompt=self.prompt_tokens, completion=self.completion_tokens, estimated=self.estimated)


async def _converse(
    context: ToolContext,
    messages: list[dict[str, Any]],
    words: _Words,
    usage: _Usage,
    stop: _StopWatch,
    life: _Life,
) -> None:
    """The model's rounds: words streamed as they come, tool calls applied in order between."""
    for round_number in range(settings.COACH_MAX_TOOL_ROUNDS + 1):
        # The last round offers no tools: the model has to answer in words. Nor does a turn
        # that does not use memory; if its model calls a tool anyway, the result says
        # memory is off (run_tool refuses it), and it is asked again for words.
        last_round = round_number == settings.COACH_MAX_TOOL_ROUNDS
        tools = tool_definitions() if context.remembers and not last_round else None
        words.next_round()
        response = await _one_response(messages, tools=tools, on_text=words.add, stop=stop)
        usage.add(response, messages, tools)
        if not response.tool_calls or last_round:
            # Tool calls in the last round are not run; without words, the turn fails.
            return
        messages.append(
            {
                "role": "assistant",
                "content": response.text or None,
                "tool_calls": [
                    {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
                    for call in response.tool_calls
                ],
            }
        )
        # In order, each seeing the one before: two near-identical saves in one response
        # meet the dedup check one after the other.
        results = []
        for call in response.tool_calls:
            # A given-up attempt writes nothing more: its retry may be writing the same.
            life.check()
            seen = len(context.changes)
            result = await db_step(run_tool, context, call.name, call.arguments)
            results.append(result)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
            for change in context.changes[seen:]:
                await words.cue(change.cue())
        if response.text.strip() and all(settles(result) for result in results):
            # The reply came with its writes, and every one was done: another round would
            # send the whole prompt again to learn nothing.
            return


async def _one_response(
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None,
    on_text: Callable[[str], Awaitable[None]],
    stop: _StopWatch,
) -> ModelResponse:
    response: ModelResponse | None = None
    # The model must start within COACH_FIRST_WORDS_SECONDS; once it has, the turn's own
    # deadline is the only one left.
    try:
        async with asyncio.timeout(settings.COACH_FIRST_WORDS_SECONDS) as first_words:
            async for piece in llm.stream_chat(messages, tools=tools):
                first_words.reschedule(None)
                if await stop.asked():
                    raise _Stopped
                if isinstance(piece, TextDelta):
                    await on_text(piece.text)
                else:
                    response = piece
    except TimeoutError:
        raise _TooSlow(f"the model did not start answering within {settings.COACH_FIRST_WORDS_SECONDS} s") from None
    assert response is not None, "stream_chat always ends with the whole response"
    return response


async def _stop_requested(message_id: int) -> bool:
    try:
        return await streams.stop_requested(message_id)
    except RedisError:
        # Without Redis no Stop can be asked for; the reply goes on.
        return False


async def _fail(attempt: Attempt, life: _Life, *, error: str, shown: str, partial: str) -> None:
    """Record the failure, then tell the readers; each step is tried on its own, so a
    database that is down still lets the browser hear the turn ended (the sweep fixes
    the record later)."""
    life.finishing()
    await _recorded(reply_fail, attempt=attempt, error=error, partial_text=partial)
    await _append(attempt, streams.FAILED, {"message": shown})


async def _append(attempt: Attempt, kind: str, data: dict[str, Any]) -> None:
    try:
        await streams.reply_append(attempt.message_id, kind, data, attempt=attempt.stream_holder)
    except streams.NotHeld:
        logger.warning("message %s: another attempt holds its stream; no %s event", attempt.message_id, kind)
    except Exception:
        # Readers then learn the outcome from the database (they check it while they wait).
        logger.exception("the %s event of message %s could not reach its stream", kind, attempt.message_id)
