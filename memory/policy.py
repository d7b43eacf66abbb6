"""Which memories a user's coach forgets, and why. Pure: no database, no clock.

1. What the user wrote (user, manual, onboarding) is never evicted.
2. Safety-shaped memories (injury, safety, medical, allergy, constraint) are never
   evicted, whoever wrote them.
3. Weekly episodes keep the newest `max_episodes`; older ones go, oldest first.
4. Everything else goes oldest-first (by when it last changed) until the user holds at
   most `max_stored` memories besides episodes. If protected ones alone exceed that,
   nothing protected goes: the store may only err on the side of keeping.

No importance scoring and no merging by similarity: a rule that says "this never leaves"
cannot evict a nut allergy that merely reads like boilerplate.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

USER_SOURCES = frozenset({"user", "manual", "onboarding"})
PROTECTED_CATEGORIES = frozenset({"injury", "safety", "medical", "allergy", "constraint"})
EPISODE = "episode"


@dataclass(frozen=True)
class MemoryFacts:
    """What the policy needs to know of one memory."""

    key: str
    source: str
    category: str
    updated_at: datetime


@dataclass(frozen=True)
class Eviction:
    key: str
    reason: str


def is_protected(memory: MemoryFacts) -> bool:
    # A union, never an intersection: a safety fact is one whoever held the pen.
    return memory.source in USER_SOURCES or memory.category in PROTECTED_CATEGORIES


def protection_reason(memory: MemoryFacts) -> str | None:
    """Why a memory is kept for good, in words a user reads; None when it is not."""
    if memory.source in USER_SOURCES:
        return "you wrote it" if memory.source != "onboarding" else "you told us at onboarding"
    if memory.category in PROTECTED_CATEGORIES:
        return f"it is about your {'safety' if memory.category == 'safety' else memory.category}"
    return None


def plan_eviction(memories: Sequence[MemoryFacts], *, max_stored: int, max_episodes: int) -> list[Eviction]:
    """The memories to evict, oldest first within each rule, each with its reason."""
    episodes = [m for m in memories if m.category == EPISODE]
    others = [m for m in memories if m.category != EPISODE]
    return [
        *_evict_oldest(
            episodes,
            keep_at_most=max_episodes,
            reason=f"a weekly episode older than the newest {max_episodes}",
        ),
        *_evict_oldest(
            others,
            keep_at_most=max_stored,
            reason=f"the oldest unprotected memory when more than {max_stored} were stored",
        ),
    ]


def forgetting_order(memories: Iterable[MemoryFacts]) -> list[MemoryFacts]:
    """Unprotected memories besides episodes in the order the ceiling would take them."""
    return sorted((m for m in memories if m.category != EPISODE and not is_protected(m)), key=_age)


def _evict_oldest(memories: list[MemoryFacts], *, keep_at_most: int, reason: str) -> list[Eviction]:
    excess = len(memories) - keep_at_most
    if excess <= 0:
        return []
    candidates = sorted((m for m in memories if not is_protected(m)), key=_age)
    return [Eviction(key=m.key, reason=reason) for m in candidates[:excess]]


def _age(memory: MemoryFacts) -> tuple[datetime, str]:
    # The key breaks ties, so the same store always gives the same plan.
    return (memory.updated_at, memory.key)
