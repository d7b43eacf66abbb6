"""The mechanics every memory write shares: the person's lock, a draft applied to a row,
the event that records it, the text erased at the person's request, and the eviction
policy applied in the writer's own transaction.

Callers hold `transaction.atomic()`; each function here is one step inside it.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone

from infra.llm import Embedding
from memory.drafts import MemoryDraft
from memory.models import Memory, MemoryEvent
from memory.policy import Eviction, plan_eviction
from memory.selectors import memory_facts_for_user

if TYPE_CHECKING:
    from accounts.models import User

Actor = MemoryEvent.Actor


def lock_user(user: User) -> None:
    # Serialises every memory write of one user: the eviction plan reads the whole store,
    # so two concurrent saves must not both plan against the same 60 rows.
    get_user_model().objects.select_for_update().filter(pk=user.pk).values_list("pk", flat=True).get()


def apply_draft(memory: Memory, draft: MemoryDraft, *, embedding: Embedding | None, now: datetime) -> None:
    memory.tier, memory.category = draft.tier, draft.category
    memory.summary, memory.content = draft.summary, draft.content
    memory.due_at, memory.status = draft.due_at, draft.status
    if embedding is not None:
        memory.embedding, memory.embedding_model = embedding.vector, embedding.model
    memory.version += 1
    memory.updated_at = now


def erase_for_user(memory: Memory, *, action: str, now: datetime) -> None:
    # What the person asked to be forgotten is kept nowhere: not in the row, not in the
    # text of its history. The events stay, so the history still says what happened.
    MemoryEvent.objects.filter(user_id=memory.user_id, key=memory.key).update(before=None, after=None, reason="")
    record_event(memory, actor=Actor.USER, action=action, now=now)
    memory.delete()


def apply_eviction_policy(*, user: User, now: datetime) -> tuple[Eviction, ...]:
    plan = plan_eviction(
        memory_facts_for_user(user=user),
        max_stored=settings.MEMORY_MAX_STORED,
        max_episodes=settings.MEMORY_MAX_EPISODES,
    )
    if not plan:
        return ()
    reasons = {eviction.key: eviction.reason for eviction in plan}
    doomed = list(Memory.objects.filter(user=user, key__in=reasons))
    assert not any(m.is_protected for m in doomed), "the policy never evicts a protected memory"
    MemoryEvent.objects.bulk_create(
        MemoryEvent(
            user=user,
            memory=memory,
            key=memory.key,
            actor=Actor.SYSTEM,
            action=MemoryEvent.Action.EVICTED,
            reason=reasons[memory.key],
            before=memory.snapshot(),
            created_at=now,
        )
        for memory in doomed
    )
    Memory.objects.filter(pk__in=[m.pk for m in doomed]).delete()
    return tuple(plan)


def record_event(
    memory: Memory,
    *,
    actor: str,
    action: str,
    reason: str = "",
    before: str | None = None,
    after: str | None = None,
    now: datetime | None = None,
) -> MemoryEvent:
    return MemoryEvent.objects.create(
        user_id=memory.user_id,
        memory=memory if memory.pk else None,
        key=memory.key,
        actor=actor,
        action=action,
        reason=reason,
        before=before,
        after=after,
        created_at=now or timezone.now(),
    )
