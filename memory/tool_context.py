"""What every memory tool call is bound to: the turn's person, clock and provenance, what
the turn did so far, and the results the calls share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model

from memory.drafts import MemoryOff
from memory.models import Memory, author_for_model

if TYPE_CHECKING:
    from accounts.models import User


@dataclass(frozen=True)
class MemoryChange:
    """What a tool call did to the person's memory, for the chat's quiet cue."""

    action: str  # "saved", "updated", "proposed" or "deleted"
    memory_id: int
    summary: str

    def cue(self) -> dict[str, Any]:
        return {"action": self.action, "memory_id": self.memory_id, "summary": self.summary}


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
    duplicate_keys: set[str] = field(default_factory=set)
    # Keys whose save was flagged as a near-copy in this turn: keep_separate applies to them.
    flagged_keys: set[str] = field(default_factory=set)
    # What the turn's calls did, in order, for the chat to show quietly.
    changes: list[MemoryChange] = field(default_factory=list)
    # The embedding model the person's memories were last found (or brought) up to.
    embedded_by: str | None = None


class ToolRefusal(Exception):
    """A call the model can correct; the message goes back to it as the result."""


def require_memory_on(context: ToolContext) -> None:
    """Where a read found nothing: it reads nothing while memory is off, so say which it was."""
    if not get_user_model().objects.filter(pk=context.user.pk, memory_enabled=True).exists():
        raise MemoryOff("memory is off")


def memory_as_result(memory: Memory) -> dict[str, Any]:
    return {
        "key": memory.key,
        "tier": memory.tier,
        "category": memory.category,
        "written_by": author_for_model(memory.source),
        "summary": memory.summary,
        "content": memory.content,
        "due_at": memory.due_at.isoformat() if memory.due_at else None,
        "status": memory.status or None,
        "updated_at": memory.updated_at.date().isoformat(),
    }
