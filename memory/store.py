"""The mechanics every memory write shares, each one step inside the writer's transaction:
the person's lock, the store as the policy sees it, a draft applied to a row, neutral keys
for what must not be named by its text, the ceiling rule and the evictions, and the
events that record it all.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone

from infra.llm import Embedding
from memory.drafts import MemoryDraft, MemoryFull, MemoryNoRoom, MemoryOff
from memory.keys import is_neutral, needs_neutral_key, neutral_key
from memory.models import Memory, MemoryEvent
from memory.policy import Eviction, MemoryFacts, coach_write_refusal, person_write_refusal, plan_eviction
from memory.selectors import memory_facts_for_user

if TYPE_CHECKING:
    from accounts.models import User

Actor = MemoryEvent.Actor


def lock_user(user: User, *, actor: str | None = None) -> None:
    """Serialises every memory write of one person: the eviction plan reads the whole store,
    so two concurrent saves must not both plan against the same 60 rows. A write by the
    coach is refused (MemoryOff) while the person has memory off, read from the row it
    locks, so no write slips in after they turned it off."""
    people = get_user_model().objects.select_for_update().filter(pk=user.pk)
    _refuse_if_off(people.values_list("memory_enabled", flat=True).get(), actor=actor)


def lock_user_for_key(user: User, key: str, *, actor: str) -> tuple[list[MemoryFacts], Memory | None]:
    """lock_user, then the store as store_facts reads it and the memory named `key` (whole,
    and locked too): what a write by key reads. Read after the lock, so each sees what
    the write it waited for left."""
    lock_user(user, actor=actor)
    keyed = Memory.objects.keyed(user.pk, key).select_for_update(of=("self",)).first()
    return store_facts(user), keyed


def _refuse_if_off(memory_enabled: bool, *, actor: str | None) -> None:
    if actor == Actor.COACH and not memory_enabled:
        raise MemoryOff("memory is off: nothing was saved")


def write_memory(memory: Memory, event: MemoryEvent) -> None:
    """Write the row of a memory a draft was applied to (inserted if new, else updated),
    then the event recording it, which points at the memory's id: two statements in the
    caller's transaction, both instances left saved."""
    memory.save()
    event.memory_id = memory.pk
    event.save(force_insert=True)


def store_facts(user: User) -> list[MemoryFacts]:
    """The person's store as the policy reads it, before a write changes it."""
    return memory_facts_for_user(user=user)


def apply_draft(memory: Memory, draft: MemoryDraft, *, embedding: Embedding | None, now: datetime) -> None:
    memory.tier, memory.category = draft.tier, draft.category
    memory.summary, memory.content = draft.summary, draft.content
    memory.due_at, memory.status, memory.due_month_only = draft.due_at, draft.status, draft.due_month_only
    if embedding is not None:
        memory.embedding, memory.embedding_model = embedding.vector, embedding.model
    memory.version += 1
    memory.updated_at = now


def give_neutral_key(memory: Memory) -> None:
    """What the person wrote, and anything protected, is named by its category and a number,
    never by its text. A memory that becomes so is renamed, in its history too."""
    if not needs_neutral_key(memory.facts) or is_neutral(memory.key):
        return
    taken = set(Memory.objects.filter(user_id=memory.user_id).exclude(pk=memory.pk).values_list("key", flat=True))
    memory.key = neutral_key(memory.category, taken)
    if memory.pk is not None:
        MemoryEvent.objects.filter(user_id=memory.user_id, memory_id=memory.pk).update(key=memory.key)


def settle_store(memory: Memory, *, actor: str, before: Sequence[MemoryFacts], now: datetime) -> tuple[Eviction, ...]:
    """After `memory` was saved: the ceiling rule for anyone but the person (raising
    MemoryNoRoom, which rolls the write back), the bound on what the person keeps for the
    person (MemoryFull), then the evictions the policy asks for."""
    after = [facts for facts in before if facts.ref != memory.pk] + [memory.facts]
    if actor == Actor.USER:
        refuse_past_what_a_person_keeps(before, after)
    else:
        refusal = coach_write_refusal(
            before,
            after,
            written=memory.pk,
            max_stored=settings.MEMORY_MAX_STORED,
            max_episodes=settings.MEMORY_MAX_EPISODES,
        )
        if refusal:
            raise MemoryNoRoom(f"Not saved: {refusal}.")
    return apply_eviction_policy(user_id=memory.user_id, facts=after, now=now)


def refuse_past_what_a_person_keeps(before: Sequence[MemoryFacts], after: Sequence[MemoryFacts]) -> None:
    """MemoryFull, which rolls the write back, when a write of the person's leaves them more
    memories than MEMORY_MAX_PER_PERSON (memory.policy, rule 5)."""
    if person_write_refusal(
        before,
        after,
        max_stored=settings.MEMORY_MAX_STORED,
        max_episodes=settings.MEMORY_MAX_EPISODES,
        max_per_person=settings.MEMORY_MAX_PER_PERSON,
    ):
        raise MemoryFull(
            f"You have {settings.MEMORY_MAX_PER_PERSON} memories, the most your coach keeps for one person. "
            "Delete some you no longer need, then try again: nothing was saved."
        )


def apply_eviction_policy(
    *, user_id: int, now: datetime, facts: Sequence[MemoryFacts] | None = None
) -> tuple[Eviction, ...]:
    if facts is None:
        facts = memory_facts_for_user(user=get_user_model()(pk=user_id))
    plan = plan_eviction(facts, max_stored=settings.MEMORY_MAX_STORED, max_episodes=settings.MEMORY_MAX_EPISODES)
    if not plan:
        return ()
    reasons = {eviction.ref: eviction.reason for eviction in plan}
    doomed = list(Memory.objects.filter(user_id=user_id, pk__in=reasons))
    assert not any(m.is_protected for m in doomed), "the policy never evicts a protected memory"
    MemoryEvent.objects.bulk_create(
        MemoryEvent(
            user_id=user_id,
            memory_id=memory.pk,
            key=memory.key,
            actor=Actor.SYSTEM,
            action=MemoryEvent.Action.EVICTED,
            reason=reasons[memory.pk],
            before=memory.snapshot(),
            created_at=now,
        )
        for memory in doomed
    )
    Memory.objects.filter(pk__in=[m.pk for m in doomed]).delete()
    return tuple(plan)


def erase_for_user(memory: Memory, *, action: str, now: datetime) -> None:
    # What the person asked to be forgotten is kept nowhere: not in the row, not in the
    # text or the key of its history. The events stay, so the history says what happened.
    MemoryEvent.objects.filter(user_id=memory.user_id, memory_id=memory.pk).update(
        key=None, before=None, after=None, reason=""
    )
    record_event(memory, actor=Actor.USER, action=action, keep_key=False, now=now)
    memory.delete()


def record_event(memory: Memory, **fields: Any) -> MemoryEvent:
    """Write the event `memory_event(memory, **fields)` makes: every memory write records one."""
    event = memory_event(memory, **fields)
    event.save(force_insert=True)
    return event


def memory_event(
    memory: Memory,
    *,
    actor: str,
    action: str,
    reason: str = "",
    before: str | None = None,
    after: str | None = None,
    keep_key: bool = True,
    now: datetime | None = None,
) -> MemoryEvent:
    """The event recording a change to `memory`, not yet written."""
    return MemoryEvent(
        user_id=memory.user_id,
        memory_id=memory.pk,
        key=memory.key if keep_key else None,
        actor=actor,
        action=action,
        reason=reason,
        before=before,
        after=after,
        created_at=now or timezone.now(),
    )
