"""The look-back (coach/look_back.py, the sixth tool's search over past conversations), if
this branch has it: its indexing and its search, read as the benchmark needs them, and its
variants measured side by side (by meaning, by words, both fused; the exchange alone or a
window of turns; the top 5 or as many as fit in COACH_LOOK_BACK_MAX_TOKENS).

Looked up when the benchmark runs, so that without it the benchmark still measures the
rest and says plainly that the look-back column is not available, never a made-up number.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accounts.models import User
from infra.tokens import estimate_tokens

# Who a found line is attributed to, as this benchmark reads it.
PERSON, OTHER = "person", "other"
TOP = 5


@dataclass(frozen=True)
class FoundExchange:
    """One exchange a look-back returned: the person's message it starts with (None for a
    conversation's summary), and its lines as the result attributes them: (PERSON or
    OTHER, words), with the message each line is (when the look-back says)."""

    session_id: int | None
    message_id: int | None
    lines: tuple[tuple[str, str], ...]
    message_ids: tuple[int | None, ...] = ()


@dataclass(frozen=True)
class Variant:
    """One way of looking back: ranked by `by` (meaning, words, both), each exchange alone
    or as its window of turns, the top 5 or as many as fit in the token budget."""

    by: str
    window: bool
    budget: bool

    @property
    def name(self) -> str:
        ranked = {"meaning": "meaning only", "words": "words only", "both": "fused"}[self.by]
        return f"{ranked}, {'window' if self.window else 'exchange'}, {'token budget' if self.budget else 'top 5'}"


VARIANTS = tuple(
    Variant(by, window, budget)
    for by in ("meaning", "words", "both")
    for window in (False, True)
    for budget in (False, True)
)


@dataclass(frozen=True)
class Searched:
    found: list[FoundExchange]
    # What the model would read of it, in the app's estimate.
    tokens: int


@dataclass(frozen=True)
class LookBack:
    index: Callable[[int], int] | None
    search: Callable[[User, str, int | None, int | None], list[FoundExchange]] | None
    why_not: str = ""
    # The search as the app runs it, with its result's tokens; and each variant's.
    measure: Callable[[User, str, Variant | None, int | None], Searched] | None = None

    @property
    def available(self) -> bool:
        return self.search is not None


def look_back() -> LookBack:
    """The look-back's calls, or why there are none."""
    try:
        module = importlib.import_module("coach.look_back")
        index, search = module.exchanges_index, module.conversations_search
    except (ImportError, AttributeError) as error:
        return LookBack(None, None, f"not available: coach.look_back is not on this branch ({error})")

    person = getattr(module, "PERSON", "person")
    render = getattr(module, "look_back_text", None)
    has_variants = "by" in inspect.signature(search).parameters

    def searched(user: User, query: str, limit: int | None, current_session_id: int | None) -> list[FoundExchange]:
        found = search(user=user, query=query, limit=limit, current_session_id=current_session_id)
        return [_exchange(item, person) for item in found]

    def measured(user: User, query: str, variant: Variant | None, current_session_id: int | None) -> Searched:
        options: dict[str, Any] = {}
        limit = None
        if variant is not None:
            options = {"by": variant.by, "window": module.WINDOW if variant.window else module.Window(0, 1)}
            if not variant.budget:
                # The top 5 whatever they cost: no budget cuts them.
                limit, options["max_tokens"] = TOP, 10**6
        found = search(user=user, query=query, limit=limit, current_session_id=current_session_id, **options)
        tokens = estimate_tokens(render(found)) if render is not None and found else 0
        return Searched([_exchange(item, person) for item in found], tokens)

    return LookBack(lambda user_id: index(user_id=user_id), searched, measure=measured if has_variants else None)


def _exchange(item: Any, person: str) -> FoundExchange:
    lines = tuple((PERSON if line.speaker == person else OTHER, str(line.words)) for line in item.lines)
    ids = tuple(getattr(line, "message_id", None) for line in item.lines)
    return FoundExchange(item.session_id, item.message_id, lines, ids)
