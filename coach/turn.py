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
import json
import logging
import threading
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from coach import streams
from coach.claims import (
    FAILED_FOR_GOOD,
    FAILED_RETRYABLE,
    FAILED_TOO_SLOW,
    REACHED_LENGTH,
    Attempt,
    BegunTurn,
    ReplyTokens,
    TurnLost,
    attempt_under_way,
    reply_fail,
    reply_of,
    reply_save,
    reply_stop,
    turn_begin,
    turn_not_begun,
)
from coach.look_back import LOOK_BACK_TOOL
from coach.rendering import render_reply
from coach.reply_words import ReplyWords, Stopped, StopWatch
from coach.runner import run_in_background
from coach.services import message_keep_out
from coach.tasks import exchanges_index_soon
from coach.turn_life import AttemptLife, Lost, finishing, recorded
from infra import llm
from infra.dbsteps import db_step
from infra.llm import LLMError, ModelResponse, TextDelta
from infra.tokens import estimate_tokens
from memory.tool_schemas import tool_definitions
from memory.tools import ToolContext, run_tool, settles

if TYPE_CHECKING:
    from coach.models import Message

logger = logging.getLogger(__name__)


class _TooSlow(TimeoutError):
    """The model did not start answering in time."""


class ReachedLength(Exception):
    """The model's words stopped at the reply's length limit (finish_reason "length")."""


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
        begun = await finishing(turn_begin, user_id=user_id, message_id=message_id, now=timezone.now())
    except Exception:
        # Its claim was undone with the transaction: no attempt holds the message, so its
        # readers learn the failure from the database.
        logger.exception("turn for message %s could not begin", message_id)
        await recorded(turn_not_begun, message_id=message_id, error="could not prepare the turn")
        return
    if begun is None:
        return
    with streams.written_here(message_id):
        await _answer(begun)


async def _answer(begun: BegunTurn) -> None:
    attempt, message = begun.attempt, begun.message
    life = AttemptLife(attempt)
    stop = StopWatch(message.pk, life)
    words = ReplyWords(attempt, stop, life)
    usage = _Usage()
    context = _tool_context(begun)
    if not context.remembers and message.session.remembered:
        # Memory is off for this turn of a remembered conversation: what is said in it is
        # never summarised nor found by a look-back, even once memory is back on. Marked
        # before the reply is saved, so no indexer can take it up in between.
        await recorded(message_keep_out, user_id=begun.user.pk, message_id=message.pk)
    await words.begin()
    if attempt.continues is not None:
        await words.resume(attempt.continues.content)
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
        except ReachedLength:
            await _limited(attempt, life, partial=words.text)
        except Stopped:
            life.finishing()
            if not await recorded(reply_stop, attempt=attempt, partial_text=words.text):
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
        except (TurnLost, Lost):
            # Swept, retried or erased meanwhile: its outcome is another's to tell.
            logger.warning("turn for message %s lost its claim; it ends without a word", message.pk)
        except Exception:
            # Whatever broke, the person's message must not be left "being answered" forever.
            logger.exception("turn for message %s broke", message.pk)
            await _fail(attempt, life, error="internal error", shown=FAILED_FOR_GOOD, partial=words.text)
        else:
            await _append(attempt, streams.DONE, {"html": render_reply(reply.content)})
            if context.remembers:
                # Once the reply is out: the exchange is embedded for later look-backs by a
                # worker, never on the way to anyone's first word. A step of its own, off
                # the loop (handing out a task is a round trip to the broker).
                await db_step(exchanges_index_soon, user_id=begun.user.pk)


def _tool_context(begun: BegunTurn) -> ToolContext:
    """What the turn's tool calls run with: the person, their time zone, whether memory is
        used, the message, the look-back (a tool of the chat's own), and whether the attempt is
    still under way, asked as each write is made."""
    return ToolContext(
        user=begun.user,
        time_zone=begun.user.time_zone,
        remembers=begun.conversation.remembers,
        session_id=begun.message.session_id,
        message_id=begun.message.pk,
        tools_from_above={LOOK_BACK_TOOL.name: LOOK_BACK_TOOL},
        # A call still waiting on its embedding when the turn ends writes nothing after it.
        turn_under_way=partial(attempt_under_way, begun.attempt),
    )


async def _reply_saved(attempt: Attempt, text: str, tokens: ReplyTokens) -> Message:
    try:
        return await finishing(reply_save, attempt=attempt, text=text, tokens=tokens)
    except TurnLost:
        # A save that went through as its connection dropped, then tried again, finds the
        # message answered: by this very attempt, if its reply is there.
        saved = await db_step(reply_of, attempt=attempt)
        if saved is None:
            raise
        return saved


class _Usage:
    """The tokens of a turn, summed over its model rounds: the provider's counts where it
    sent them, an estimate from the characters sent and received where it did not."""

    def __init__(self) -> None:
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.estimated = False
        # What the provider said it read from its cache; None while it has said nothing.
        self.cached_tokens: int | None = None

    def add(self, response: ModelResponse, sent: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> None:
        if response.usage is not None:
            self.prompt_tokens += response.usage.prompt_tokens
            self.completion_tokens += response.usage.completion_tokens
            if response.usage.cached_tokens is not None:
                self.cached_tokens = (self.cached_tokens or 0) + response.usage.cached_tokens
            return
        self.estimated = True
        # As sent on the wire, but with letters left as letters (escapes would inflate the count).
        wire = json.dumps(sent, ensure_ascii=False) + json.dumps(tools or [], ensure_ascii=False)
        self.prompt_tokens += estimate_tokens(wire)
        answered = response.text + "".join(call.name + call.arguments for call in response.tool_calls)
        self.completion_tokens += estimate_tokens(answered)

    def tokens(self) -> ReplyTokens:
        return ReplyTokens(
            prompt=self.prompt_tokens,
            completion=self.completion_tokens,
            estimated=self.estimated,
            cached=self.cached_tokens,
        )


async def _converse(
    context: ToolContext,
    messages: list[dict[str, Any]],
    words: ReplyWords,
    usage: _Usage,
    stop: StopWatch,
    life: AttemptLife,
) -> None:
    """The model's rounds: words streamed as they come, tool calls applied in order between."""
    for round_number in range(settings.COACH_MAX_TOOL_ROUNDS + 1):
        # The last round offers no tools: the model has to answer in words. Nor does a turn
        # that does not use memory; if its model calls a tool anyway, the result says
        # memory is off (run_tool refuses it), and it is asked again for words.
        last_round = round_number == settings.COACH_MAX_TOOL_ROUNDS
        tools = tool_definitions(from_above=[LOOK_BACK_TOOL]) if context.remembers and not last_round else None
        words.next_round()
        response = await _one_response(messages, tools=tools, on_text=words.add, stop=stop)
        usage.add(response, messages, tools)
        if response.finish_reason == "length" and not response.tool_calls:
            # Words the server stopped at COACH_MAX_TOKENS are never passed off as whole.
            raise ReachedLength
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
    stop: StopWatch,
) -> ModelResponse:
    response: ModelResponse | None = None
    # The model must start within COACH_FIRST_WORDS_SECONDS; once it has, the turn's own
    # deadline is the only one left.
    try:
        async with asyncio.timeout(settings.COACH_FIRST_WORDS_SECONDS) as first_words:
            async for piece in llm.stream_chat(messages, tools=tools):
                first_words.reschedule(None)
                if await stop.asked():
                    raise Stopped
                if isinstance(piece, TextDelta):
                    await on_text(piece.text)
                else:
                    response = piece
    except TimeoutError:
        raise _TooSlow(f"the model did not start answering within {settings.COACH_FIRST_WORDS_SECONDS} s") from None
    assert response is not None, "stream_chat always ends with the whole response"
    return response


async def _limited(attempt: Attempt, life: AttemptLife, *, partial: str) -> None:
    """The words stopped at the length limit: kept, marked so, and offered to go on."""
    life.finishing()
    logger.info("the reply to message %s reached its length limit", attempt.message_id)
    await recorded(reply_fail, attempt=attempt, error=REACHED_LENGTH, partial_text=partial, limited=True)
    await _append(attempt, streams.FAILED, {"message": REACHED_LENGTH, "limited": True})


async def _fail(attempt: Attempt, life: AttemptLife, *, error: str, shown: str, partial: str) -> None:
    """Record the failure, then tell the readers; each step is tried on its own, so a
    database that is down still lets the browser hear the turn ended (the sweep fixes
    the record later)."""
    life.finishing()
    await recorded(reply_fail, attempt=attempt, error=error, partial_text=partial)
    await _append(attempt, streams.FAILED, {"message": shown})


async def _append(attempt: Attempt, kind: str, data: dict[str, Any]) -> None:
    try:
        await streams.reply_append(attempt.message_id, kind, data, attempt=attempt.stream_holder)
    except streams.NotHeld:
        logger.warning("message %s: another attempt holds its stream; no %s event", attempt.message_id, kind)
    except Exception:
        # Readers then learn the outcome from the database (they check it while they wait).
        logger.exception("the %s event of message %s could not reach its stream", kind, attempt.message_id)
