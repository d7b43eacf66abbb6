"""One chat turn, after the person's message is saved.

The context is assembled; the model is called with the memory tools and streams; its
tool calls are applied in order and their results sent back, for at most
COACH_MAX_TOOL_ROUNDS rounds (then it must answer in words); the reply is saved when
whole. The memory work never shows: only the words are streamed to the browser.

The turn runs as its own task and reports through a queue, so a person who closes the
tab mid-reply does not cut the reply short: it is completed and saved for their return.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings

from coach.conversation import Conversation
from coach.models import Message
from coach.rendering import render_reply
from coach.services import reply_fail, reply_save
from infra import llm
from infra.dbsteps import db_step
from infra.llm import LLMError, ModelResponse, TextDelta
from memory.tools import ToolContext, run_tool, tool_definitions

if TYPE_CHECKING:
    from accounts.models import User

logger = logging.getLogger(__name__)

FAILED_RETRYABLE = "Your coach couldn't answer just now. Your message is saved: try again in a moment."
FAILED_FOR_GOOD = "Your coach couldn't answer this message. It is saved; if trying again fails too, we are on it."


@dataclass(frozen=True)
class ReplyText:
    """More of the reply's words."""

    text: str


@dataclass(frozen=True)
class ReplyDone:
    reply_id: int
    html: str


@dataclass(frozen=True)
class ReplyFailed:
    message: str


TurnEvent = ReplyText | ReplyDone | ReplyFailed

# Turns still running after their stream closed: held here so they are not collected.
_running: set[asyncio.Task[None]] = set()


async def stream_turn(*, user: User, message: Message, conversation: Conversation) -> AsyncIterator[TurnEvent]:
    """Run the turn that answers `message` (claimed by the caller, who also assembled the
    conversation in the same database step) and follow it."""
    events: asyncio.Queue[TurnEvent] = asyncio.Queue()
    task = asyncio.create_task(_run_turn(user=user, message=message, conversation=conversation, emit=events.put_nowait))
    _running.add(task)
    task.add_done_callback(_running.discard)
    while True:
        event = await events.get()
        yield event
        if not isinstance(event, ReplyText):
            return


class _Words:
    """The reply's words as they arrive; a later round's words start a new paragraph."""

    def __init__(self, emit: Callable[[TurnEvent], None]) -> None:
        self._parts: list[str] = []
        self._emit = emit
        self._new_round = False

    def next_round(self) -> None:
        self._new_round = bool(self._parts)

    def add(self, text: str) -> None:
        if self._new_round:
            text, self._new_round = "\n\n" + text.lstrip(), False
        self._parts.append(text)
        self._emit(ReplyText(text))

    @property
    def text(self) -> str:
        return "".join(self._parts)


async def _run_turn(
    *, user: User, message: Message, conversation: Conversation, emit: Callable[[TurnEvent], None]
) -> None:
    words = _Words(emit)
    try:
        await _converse(user=user, message=message, messages=conversation.messages, words=words)
        if not words.text.strip():
            raise LLMError("the model answered with no words", retryable=True)
    except LLMError as error:
        logger.warning("turn for message %s failed: %s", message.pk, error)
        await db_step(reply_fail, message=message, error=str(error), partial_text=words.text)
        emit(ReplyFailed(FAILED_RETRYABLE if error.retryable else FAILED_FOR_GOOD))
        return
    except Exception:
        # Whatever broke, the person's message must not be left "being answered" forever.
        logger.exception("turn for message %s broke", message.pk)
        await db_step(reply_fail, message=message, error="internal error", partial_text=words.text)
        emit(ReplyFailed(FAILED_FOR_GOOD))
        return
    reply = await db_step(reply_save, message=message, text=words.text.strip())
    emit(ReplyDone(reply_id=reply.pk, html=render_reply(reply.content)))


async def _converse(*, user: User, message: Message, messages: list[dict[str, Any]], words: _Words) -> None:
    """The model's rounds: words streamed as they come, tool calls applied in order between."""
    context = ToolContext(user=user, time_zone=user.time_zone, session_id=message.session_id, message_id=message.pk)
    for round_number in range(settings.COACH_MAX_TOOL_ROUNDS + 1):
        # The last round offers no tools: the model has to answer in words.
        tools = tool_definitions() if round_number < settings.COACH_MAX_TOOL_ROUNDS else None
        words.next_round()
        response = await _one_response(messages, tools=tools, on_text=words.add)
        if not response.tool_calls or tools is None:
            # Tool calls nobody offered are not run; without words, the turn fails.
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
        for call in response.tool_calls:
            result = await db_step(run_tool, context, call.name, call.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


async def _one_response(
    messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None, on_text: Callable[[str], None]
) -> ModelResponse:
    response: ModelResponse | None = None
    async for piece in llm.stream_chat(messages, tools=tools):
        if isinstance(piece, TextDelta):
            on_text(piece.text)
        else:
            response = piece
    assert response is not None, "stream_chat always ends with the whole response"
    return response
