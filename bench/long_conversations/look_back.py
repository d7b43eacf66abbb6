"""The look-back (coach/look_back.py, the sixth tool's search over past conversations), if
this branch has it: its indexing and its search, read as the benchmark needs them.

Looked up when the benchmark runs, so that without it the benchmark still measures the
rest and says plainly that the look-back column is not available, never a made-up number.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accounts.models import User

# Who a found line is attributed to, as this benchmark reads it.
PERSON, OTHER = "person", "other"


@dataclass(frozen=True)
class FoundExchange:
    """One exchange a look-back returned: the person's message it starts with (None for a
    conversation's summary), and its lines as the result attributes them: (PERSON or
    OTHER, words)."""

    session_id: int | None
    message_id: int | None
    lines: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class LookBack:
    index: Callable[[int], int] | None
    search: Callable[[User, str, int, int | None], list[FoundExchange]] | None
    why_not: str = ""

    @property
    def available(self) -> bool:
        return self.search is not None


def look_back() -> LookBack:
    """The look-back's two calls, or why there are none."""
    try:
        module = importlib.import_module("coach.look_back")
        index, search = module.exchanges_index, module.conversations_search
    except (ImportError, AttributeError) as error:
        return LookBack(None, None, f"not available: coach.look_back is not on this branch ({error})")

    person = getattr(module, "PERSON", "person")

    def searched(user: User, query: str, limit: int, current_session_id: int | None) -> list[FoundExchange]:
        found = search(user=user, query=query, limit=limit, current_session_id=current_session_id)
        return [_exchange(item, person) for item in found]

    return LookBack(lambda user_id: index(user_id=user_id), searched)


def _exchange(item: Any, person: str) -> FoundExchange:
    lines = tuple((PERSON if line.speaker == person else OTHER, str(line.words)) for line in item.lines)
    return FoundExchange(item.session_id, item.message_id, lines)
