"""What the model is sent for a turn, piece by piece: the system prompt as assembled from
scratch, the person's "Today", and the session's own history, dropped in steps.

The system prompt is the coach's instructions (coach/prompts/coach.md), today's date on the
person's own calendar, and the memory block. A conversation assembles it once and keeps
it (coach/prompting.py); this module assembles it when asked.

A conversation that is not remembered (chosen when it started, or held while the person
has memory off) and any turn of a person with memory off get no memory block and no
emails sent: in their place, a note that nothing is remembered here. The turn then
offers no memory tools (coach/turn.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from django.conf import settings

from coach.communication import sent_emails_for
from coach.models import ChatSession, Message
from infra.prompts import prompt
from infra.tokens import estimate_tokens
from memory.context import (
    MemoryContext,
    SentEmail,
    assemble_memory_context,
    memory_in_use,
    memory_unused_context,
)

if TYPE_CHECKING:
    from accounts.models import User
    from memory.models import Memory

# The most messages of history sent; past it, the oldest quarter goes at once.
HISTORY_MAX_MESSAGES = 40


@dataclass(frozen=True)
class Conversation:
    messages: list[dict[str, Any]]
    # The memory block as assembled for this turn; None when the conversation's kept prompt
    # was sent again (its block is the one assembled then).
    memory: MemoryContext | None
    history_dropped: int
    # Whether this turn may read and write the person's memories (and is offered the tools).
    remembers: bool = True
    # Why the system prompt was assembled afresh for this turn ("" when it was kept).
    rebuilt: str = ""
    notes: int = 0


def session_remembers(*, session: ChatSession, user: User) -> bool:
    """Whether a turn of `session` uses memory: the conversation is remembered and the
    person has memory on now (turned off mid-conversation, it is off from the next turn)."""
    return session.remembered and memory_in_use(user=user)


def today_line(now: datetime, time_zone: str) -> str:
    """The prompt's "Today" line: the person's own date and weekday, in their time zone."""
    local = now.astimezone(ZoneInfo(time_zone))
    return f"Today: {local.date().isoformat()} ({local:%A})"


def system_prompt(
    *,
    user: User,
    now: datetime,
    remembers: bool,
    memories: Sequence[Memory] | None = None,
    sent_emails: Sequence[SentEmail] | None = None,
    nonce: str | None = None,
    memory_budget_tokens: int | None = None,
) -> tuple[str, MemoryContext]:
    """`remembers`: whether this turn uses memory (session_remembers). Where the caller
    read them already: `memories`, the person's (as memories_for_prompt reads them);
    `sent_emails`, the emails lately sent to them (as sent_emails_for reads them).
    `nonce`: the memory block markers' (a conversation keeps its own)."""
    today = today_line(now, user.time_zone)
    if remembers:
        if sent_emails is None:
            sent_emails = sent_emails_for(user)
        memory = assemble_memory_context(
            user=user,
            now=now,
            sent_emails=sent_emails,
            memories=memories,
            nonce=nonce,
            budget_tokens=memory_budget_tokens,
        )
        block = memory.text
    else:
        # Not even the emails sent: they are the communication tier of the same memory.
        memory, block = memory_unused_context(), prompt("coach", "not_remembered")
    return "\n\n".join([prompt("coach", "coach"), today, block]), memory


@dataclass(frozen=True)
class History:
    """The history a turn sends, oldest first, and where it starts from now on."""

    messages: list[Message]
    from_id: int | None
    dropped: int


def history_in_steps(*, earlier: Sequence[Message], message: Message, from_id: int | None) -> History:
    """The conversation's history since `from_id` (its messages before `message`, oldest
    first), within COACH_HISTORY_BUDGET_TOKENS and HISTORY_MAX_MESSAGES. Past either, the
    oldest quarter of it goes at once, not one turn per turn: between the steps each
    request's history begins with the previous one's. The person's latest message always
    goes (it is not part of the history)."""
    kept = [m for m in earlier if _belongs_in_history(m) and (from_id is None or m.pk >= from_id)]
    budget = settings.COACH_HISTORY_BUDGET_TOKENS - estimate_tokens(message.content)
    tokens = [estimate_tokens(m.content) for m in kept]
    if sum(tokens) <= budget and len(kept) <= HISTORY_MAX_MESSAGES:
        return History(messages=kept, from_id=from_id, dropped=0)
    dropped = 0
    while kept and (sum(tokens) > budget * 3 // 4 or len(kept) > HISTORY_MAX_MESSAGES * 3 // 4):
        kept.pop(0)
        tokens.pop(0)
        dropped += 1
    return History(messages=kept, from_id=kept[0].pk if kept else message.pk, dropped=dropped)


def _belongs_in_history(message: Message) -> bool:
    # A reply cut short is not something the coach said; everything the person wrote is.
    return message.role == Message.Role.USER or message.status == Message.Status.COMPLETE
