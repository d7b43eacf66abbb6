"""A note the offline coach would write down, and what a recogniser of one returns."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Final

PROFILE: Final = "profile"
PROSPECTIVE: Final = "prospective"

# Said about the past: not an intention, not a standing schedule.
PAST = re.compile(r"\b(?:went|was|were|had|did|yesterday|ago|last)\b", re.IGNORECASE)
FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|my|we|our)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Note:
    """One memory the coach would save: the arguments of a `save_memory` call."""

    key: str
    tier: str
    category: str
    summary: str
    content: str
    due_at: str | None = None

    def arguments(self) -> dict[str, str | None]:
        """The `save_memory` arguments, every key present."""
        return {
            "key": self.key,
            "tier": self.tier,
            "category": self.category,
            "summary": self.summary,
            "content": self.content,
            "due_at": self.due_at,
            "keep_separate": None,
        }


@dataclass(frozen=True)
class Found:
    """A note, and where in its statement it starts (notes are kept in the order said)."""

    start: int
    note: Note


Recogniser = Callable[[str, date], Found | None]
