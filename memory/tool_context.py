"""What every memory tool call is bound to: the turn's person, clock and provenance, what
the turn did so far, and the results the calls share."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

import jsonschema
from django.contrib.auth import get_user_model
from django.db import transaction

from memory.drafts import MemoryOff, MemoryWriteError
from memory.models import Memory, MemoryEvent, Tier, author_for_model
from memory.store import lock_user

if TYPE_CHECKING:
    from accounts.models import User

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MemoryChange:
    """What a tool call did to the person's memory, for the chat's quiet cue."""

    action: str  # "saved", "updated", "proposed" or "deleted"
    memory_id: int
    summary: str

    def cue(self) -> dict[str, Any]:
        return {"action": self.action, "memory_id": self.memory_id, "summary": self.summary}


class Cue(Protocol):
    """Something a tool call did that the chat shows quietly under the reply."""

    def cue(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ToolFromAbove:
    """A tool a layer above memory hands the turn, run like the memory tools (its strict
    schema checked, its refusals and outages answered as results the model can read, refused
    while memory is off). Memory knows nothing of the chat's tables (DESIGN.md section 7),
    so the chat passes in its look-back through past conversations this way.

    `limits` are checked on our side as the memory tools' are (strict schemas leave lengths
    out); `run` takes the turn's binding and the arguments, and returns the result."""

    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[..., dict[str, Any]]
    limits: Mapping[str, dict[str, Any]] = field(default_factory=dict)

    def definition(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
                "strict": True,
            },
        }

    @cached_property
    def validator(self) -> jsonschema.protocols.Validator:
        schema = {**self.parameters, "properties": dict(self.parameters["properties"])}
        for name, extra in self.limits.items():
            schema["properties"][name] = {**schema["properties"][name], **extra}
        return jsonschema.Draft202012Validator(schema)


@dataclass
class ToolContext:
    """One turn's binding: whose memories, their clock, where a save came from, and what
    was done so far."""

    user: User
    time_zone: str = "UTC"
    # False for a conversation that is not remembered: every call is refused.
    remembers: bool = True
    session_id: int | None = None
    message_id: int | None = None
    # Writes applied (or put to the person) in this turn, and write calls made at all.
    writes: int = 0
    write_calls: int = 0
    # Searches and recalls made in this turn, the look-back's included (run_tool bounds them).
    reads: int = 0
    duplicate_keys: set[str] = field(default_factory=set)
    # Keys whose save was flagged as a near-copy in this turn: keep_separate applies to them.
    flagged_keys: set[str] = field(default_factory=set)
    # What the turn's calls did, in order, for the chat to show quietly.
    changes: list[Cue] = field(default_factory=list)
    # The embedding model the person's memories were last found (or brought) up to.
    embedded_by: str | None = None
    # Tools of the layers above, by name, offered and run beside the memory tools.
    tools_from_above: Mapping[str, ToolFromAbove] = field(default_factory=dict)
    # Why embeddings failed earlier in this turn, if they did: a later call that needs one
    # is answered at once, so an embeddings server that hangs costs the turn one wait.
    embeddings_failed: str | None = None
    # Whether the turn these calls belong to is still under way, asked inside each write's
    # transaction (the chat locks its message there): None, nothing to ask.
    turn_under_way: Callable[[], bool] | None = None

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Where a tool call writes: one transaction, the person's row locked first (as every
        write of theirs locks it), then the turn asked whether it is still under way. A turn
        that ended (failed, stopped, past its deadline, given up) refuses the write, and one
        ending meanwhile waits for it: nothing a turn started lands after it ended, however
        long an embedding kept its call waiting."""
        with transaction.atomic():
            lock_user(self.user, actor=MemoryEvent.Actor.COACH)
            if self.turn_under_way is not None and not self.turn_under_way():
                logger.info("message %s: a memory write came after its turn ended; it was not made", self.message_id)
                raise TurnEnded("the turn this call belongs to has ended: nothing was saved or changed")
            yield


class ToolRefusal(Exception):
    """A call the model can correct; the message goes back to it as the result."""


class TurnEnded(MemoryWriteError):
    """A write of a turn that ended before it came to write (see ToolContext.writing)."""


def require_memory_on(context: ToolContext) -> None:
    """Where a read found nothing: it reads nothing while memory is off, so say which it was."""
    if not get_user_model().objects.filter(pk=context.user.pk, memory_enabled=True).exists():
        raise MemoryOff("memory is off")


def memory_as_result(memory: Memory) -> dict[str, Any]:
    """A memory as a tool result gives it: the block's words ("by" and "protected" say what the
    block's marks and headings say), the full note only where it says more than the summary."""
    result: dict[str, Any] = {
        "key": memory.key,
        "tier": memory.tier,
        "category": memory.category,
        "by": author_for_model(memory.source),
        "protected": memory.is_protected,
        "summary": memory.summary,
        "updated": memory.updated_at.date().isoformat(),
    }
    if " ".join(memory.content.split()) != memory.summary:
        result["content"] = memory.content
    if memory.tier == Tier.PROSPECTIVE:
        result["due"] = (
            memory.due_at.strftime("%Y-%m" if memory.due_month_only else "%Y-%m-%d") if memory.due_at else None
        )
        result["status"] = memory.status
    return result
