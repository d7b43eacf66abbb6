"""What the model is sent for a turn: the system prompt, then the session's own history.

The system prompt is the coach's instructions (coach/prompts/coach.md), today's date, and
the memory block assembled for this request. The history keeps its newest turns within
COACH_HISTORY_BUDGET_TOKENS; the person's latest message always goes.

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

# More than the history budget ever holds: what is older is dropped without being read.
HISTORY_MAX_MESSAGES = 40


@dataclass(frozen=True)
class Conversation:
    messages: list[dict[str, Any]]
    memory: MemoryContext
    history_dropped: int
    # Whether this turn may read and write the person's memories (and is offered the tools).
    remembers: bool = True


def session_remembers(*, session: ChatSession, user: User) -> bool:
    """Whether a turn of `session` uses memory: the conversation is remembered and the
    person has memory on now (turned off mid-conversation, it is off from the next turn)."""
    return session.remembered and memory_in_use(user=user)


def system_prompt(
    *,
    user: User,
    now: datetime,
    remembers: bool,
    memories: Sequence[Memory] | None = None,
    sent_emails: Sequence[SentEmail] | None = None,
) -> tuple[str, MemoryContext]:
    """`remembers`: whether this turn uses memory (session_remembers). Where the caller
    read them already: `memories`, the person's (as memories_for_prompt reads them);
    `sent_emails`, the emails lately sent to them (as sent_emails_for reads them)."""
    today = f"Today: {now.date().isoformat()} ({now:%A})"
    if remembers:
        if sent_emails is None:
            sent_emails = sent_emails_for(user)
        memory = assemble_memory_context(user=user, now=now, sent_emails=sent_emails, memories=memories)
        block = memory.text
    else:
        # Not even the emails sent: they are the communication tier of the same memory.
        memory, block = memory_unused_context(), prompt("coach", "not_remembered")
    return "\n\n".join([prompt("coach", "coach"), today, block]), memory


def conversation_for_turn(
    *,
    user: User,
    message: Message,
    now: datetime,
    earlier: Sequence[Message],
    memories: Sequence[Memory] | None = None,
    sent_emails: Sequence[SentEmail] | None = None,
) -> Conversation:
    """The messages for the model, for a turn that answers `message`: `earlier`, the
    conversation's newest HISTORY_MAX_MESSAGES before it, oldest first; where the caller
    read them already, `memories` and `sent_emails` (system_prompt)."""
    remembers = session_remembers(session=message.session, user=user)
    system, memory = system_prompt(user=user, now=now, remembers=remembers, memories=memories, sent_emails=sent_emails)
    earlier = [m for m in earlier if _belongs_in_history(m)]
    kept: list[dict[str, Any]] = []
    budget = settings.COACH_HISTORY_BUDGET_TOKENS - estimate_tokens(message.content)
    for past in reversed(earlier):
        cost = estimate_tokens(past.content)
        if cost > budget:
            break
        budget -= cost
        kept.append({"role": past.role, "content": past.content})
    kept.reverse()
    return Conversation(
        messages=[{"role": "system", "content": system}, *kept, {"role": "user", "content": message.content}],
        memory=memory,
        history_dropped=len(earlier) - len(kept),
        remembers=remembers,
    )


def _belongs_in_history(message: Message) -> bool:
    # A reply cut short is not something the coach said; everything the person wrote is.
    return message.role == Message.Role.USER or message.status == Message.Status.COMPLETE
