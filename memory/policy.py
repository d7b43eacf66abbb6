"""Which memories a person's coach forgets, and when the coach may not write. Pure: no
database, no clock.

1. Protected, never evicted: what the person wrote (user, manual, onboarding), and
   anything safety-shaped (injury, safety, medical, allergy, constraint) whoever wrote it.
2. Weekly episodes keep the newest `max_episodes`; older ones go, oldest first.
3. Everything else goes until at most `max_stored` memories remain besides episodes:
   unprotected session notes first, then intentions, then profile notes (the profile card
   is what the coach always sees), oldest first (by when it last changed) within each.
4. The coach can never take the store past the ceiling; only the person can. A coach
   write is refused when, once everything that may go has gone, more memories would
   remain than the ceiling or than there were before it, or when the written memory would
   itself be the one to go. Protected memories the coach wrote count toward the ceiling.
5. The person may take the store past the ceiling, but not without end: a write of theirs
   is refused when, once everything that may go has gone, more memories would remain than
   `max_per_person` and than there were before it.

No importance scoring and no merging by similarity: a rule that says "this never leaves"
cannot evict a nut allergy that merely reads like boilerplate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

USER_SOURCES = frozenset({"user", "manual", "onboarding"})
PROTECTED_CATEGORIES = frozenset({"injury", "safety", "medical", "allergy", "constraint"})
EPISODE = "episode"
# Rule 3's order among unprotected memories: the first tier listed goes first.
EVICTION_TIER_ORDER = ("episodic", "prospective", "profile")


@dataclass(frozen=True)
class MemoryFacts:
    """What the policy needs to know of one memory; `ref` is whatever the caller knows it by."""

    ref: int | str
    source: str
    category: str
    tier: str
    updated_at: datetime


@dataclass(frozen=True)
class Eviction:
    ref: int | str
    reason: str


def is_protected(memory: MemoryFacts) -> bool:
    # A union, never an intersection: a safety fact is one whoever held the pen.
    return memory.source in USER_SOURCES or memory.category in PROTECTED_CATEGORIES


def protection_reason(memory: MemoryFacts) -> str | None:
    """Why a memory is kept for good, in words a person reads; None when it is not."""
    if memory.source in USER_SOURCES:
        return "you wrote it" if memory.source != "onboarding" else "you told us at onboarding"
    if memory.category in PROTECTED_CATEGORIES:
        return f"it is about your {'safety' if memory.category == 'safety' else memory.category}"
    return None


def plan_eviction(memories: Sequence[MemoryFacts], *, max_stored: int, max_episodes: int) -> list[Eviction]:
    """The memories to evict, in the order they go, each with its reason."""
    episodes = [m for m in memories if m.category == EPISODE]
    others = [m for m in memories if m.category != EPISODE]
    return [
        *_evict_first(episodes, keep_at_most=max_episodes, reason=lambda m: _EPISODE_REASON.format(max_episodes)),
        *_evict_first(
            others,
            keep_at_most=max_stored,
            reason=lambda m: _REASONS.get(m.tier, _REASONS["episodic"]).format(max_stored),
        ),
    ]


def coach_write_refusal(
    before: Sequence[MemoryFacts],
    after: Sequence[MemoryFacts],
    *,
    written: int | str,
    max_stored: int,
    max_episodes: int,
) -> str | None:
    """Rule 4: why a coach write of `written`, turning `before` into `after`, may not be
    made; None when it may. A write the plan would forget at once is refused too: there
    is no room for it, and saving it only to evict it would tell the model it was kept."""
    gone = {e.ref for e in plan_eviction(after, max_stored=max_stored, max_episodes=max_episodes)}
    for is_episode, ceiling, what in ((False, max_stored, "memories"), (True, max_episodes, "weekly episodes")):
        group = [m for m in after if (m.category == EPISODE) is is_episode]
        kept = sum(1 for m in group if m.ref not in gone)
        had = sum(1 for m in before if (m.category == EPISODE) is is_episode)
        if kept > max(ceiling, had) or any(m.ref == written and m.ref in gone for m in group):
            return (
                f"the store holds its ceiling of {ceiling} {what} and nothing in it may be forgotten to make room "
                "(what the person wrote, and safety notes, are kept for good)"
            )
    return None


def person_write_refusal(
    before: Sequence[MemoryFacts],
    after: Sequence[MemoryFacts],
    *,
    max_stored: int,
    max_episodes: int,
    max_per_person: int,
) -> str | None:
    """Rule 5: why a write of the person's, turning `before` into `after`, may not be made;
    None when it may. A change that adds nothing is never refused, however full the store."""
    now, then = (_kept_besides_episodes(store, max_stored, max_episodes) for store in (after, before))
    if now > max_per_person and now > then:
        return f"the store holds {max_per_person} memories, the most one person may keep"
    return None


def _kept_besides_episodes(memories: Sequence[MemoryFacts], max_stored: int, max_episodes: int) -> int:
    """How many memories besides episodes remain once the plan has forgotten what it would."""
    gone = {e.ref for e in plan_eviction(memories, max_stored=max_stored, max_episodes=max_episodes)}
    return sum(1 for m in memories if m.category != EPISODE and m.ref not in gone)


def forgetting_order(memories: Iterable[MemoryFacts]) -> list[MemoryFacts]:
    """Unprotected memories besides episodes, in the order the ceiling would take them."""
    return sorted((m for m in memories if m.category != EPISODE and not is_protected(m)), key=_eviction_rank)


_EPISODE_REASON = "a weekly episode older than the newest {}"
_REASONS = {
    "episodic": "the oldest of the coach's session notes, when more than {} memories were kept",
    "prospective": "the oldest of the coach's intentions once no session note was left to forget, "
    "when more than {} memories were kept",
    "profile": "the oldest of the coach's profile notes once no session note or intention was left to forget, "
    "when more than {} memories were kept",
}


def _evict_first(
    memories: list[MemoryFacts], *, keep_at_most: int, reason: Callable[[MemoryFacts], str]
) -> list[Eviction]:
    excess = len(memories) - keep_at_most
    if excess <= 0:
        return []
    candidates = sorted((m for m in memories if not is_protected(m)), key=_eviction_rank)
    return [Eviction(ref=m.ref, reason=reason(m)) for m in candidates[:excess]]


def _eviction_rank(memory: MemoryFacts) -> tuple[int, datetime, int | str]:
    tier = EVICTION_TIER_ORDER.index(memory.tier) if memory.tier in EVICTION_TIER_ORDER else 0
    # The ref breaks ties, so the same store always gives the same plan.
    return (tier, memory.updated_at, memory.ref)
