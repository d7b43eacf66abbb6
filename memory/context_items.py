"""What a memory block is made of, as its assembly reports it: the forms a memory can take,
each memory's or email's item, and the block itself."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

WHOLE, LINE, LEFT_OUT = "whole", "one line", "left out"
# The stage a context reports when memory is not used: there is no relationship to read.
MEMORY_UNUSED_STAGE = "memory off"


@dataclass(frozen=True)
class SentEmail:
    """One email of the communication tier, as the prompt quotes it. The emails app makes
    these; memory sits below it and is handed them by whoever assembles a prompt."""

    sent_on: date
    kind: str
    subject: str
    first_line: str


@dataclass(frozen=True)
class ContextItem:
    """One memory or email considered for the prompt, and the form it went in."""

    kind: str  # "memory" or "email"
    label: str  # the memory's summary, or the email's subject
    topic: str  # the memory's category, or "emails"
    form: str  # WHOLE, LINE or LEFT_OUT
    tokens: int  # what it cost in that form (0 when left out)
    memory_id: int | None = None
    key: str = ""
    source: str = ""

    @property
    def included(self) -> bool:
        return self.form != LEFT_OUT


@dataclass(frozen=True)
class MemoryContext:
    text: str
    items: tuple[ContextItem, ...]
    tokens: int
    budget: int
    stage: str
    learned: int
    # False when memory was not used at all (turned off, or a conversation not remembered).
    used: bool = True
    # The block markers' nonce ("" when there is no block).
    nonce: str = ""

    @property
    def dropped(self) -> tuple[ContextItem, ...]:
        return tuple(item for item in self.items if not item.included)
