"""Reading memories. Every function takes the user and reads only that user's rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.db.models import Exists, OuterRef, QuerySet

from memory.models import (
    Memory,
    MemoryEvent,
    MemoryOverlap,
    MemoryProposal,
    PrivateTextViewing,
    ProspectiveStatus,
    Tier,
    key_digest,
)
from memory.policy import MemoryFacts
from memory.retrieval import Query, Why, memories_found

if TYPE_CHECKING:
    from accounts.models import User


@dataclass(frozen=True)
class SimilarMemory:
    memory: Memory
    similarity: float
    # Why it was found (memory/retrieval.py): the words it shares with what was searched for,
    # and its closeness in meaning.
    why: Why = field(default_factory=Why)


def memory_list_for_user(*, user: User, in_use_only: bool = False) -> QuerySet[Memory]:
    """`in_use_only`: what the coach may read, which is nothing while the person has memory
    off; checked in the same statement, so it costs no query of its own."""
    # The embedding (thousands of floats a row) is only ever compared in SQL: not loaded.
    memories = Memory.objects.filter(user=user).defer("embedding")
    return memories.filter(user__memory_enabled=True) if in_use_only else memories


def memories_for_prompt(*, user: User) -> list[Memory]:
    """Every memory of the person, without its embedding, newest change first: what each
    prompt's memory block is assembled from (every chat turn makes this read)."""
    return list(memory_list_for_user(user=user).order_by("-updated_at", "-pk"))


def memories_protected(*, user: User) -> list[Memory]:
    """The person's protected memories (theirs, or about their safety), newest change first."""
    protected = Memory.objects.protected().filter(user=user, user__memory_enabled=True).defer("embedding")
    return list(protected.order_by("-updated_at", "-pk"))


def memory_facts_for_user(*, user: User) -> list[MemoryFacts]:
    """The policy's view of a person's store: plain columns, nothing decrypted."""
    rows = Memory.objects.filter(user=user).values_list("pk", "source", "category", "tier", "updated_at")
    return [
        MemoryFacts(ref=pk, source=source, category=category, tier=tier, updated_at=at)
        for pk, source, category, tier, at in rows
    ]


def memory_by_key(*, user: User, key: str, in_use_only: bool = False) -> Memory | None:
    """The person's memory named `key`, found by its digest (keys are encrypted), without
    its embedding."""
    memories = memory_list_for_user(user=user, in_use_only=in_use_only)
    return memories.filter(key_digest=key_digest(user.pk, key)).first()


def memories_by_similarity(
    *,
    user: User,
    vector: list[float] | None,
    model: str,
    limit: int,
    text: str = "",
    exclude_category: str | None = None,
    in_use_only: bool = False,
    exclude_key: str | None = None,
    most_words: int | None = None,
) -> list[SimilarMemory]:
    """The user's memories that `text` (embedded as `vector` by `model`) finds, by their
    words and their meaning fused (memory/retrieval.py), best first, each with its key, tier,
    category and summary and why it was found; but those of `exclude_category` and the one
    named `exclude_key`. Without `text`, by meaning alone.

    An exact scan by meaning, on purpose: the user filter leaves at most a few hundred rows,
    which PostgreSQL compares in well under a millisecond. Only embeddings of the current
    model are compared by meaning; all are by their words.
    """
    query = Query.of(user_id=user.pk, text=text, vector=vector, model=model, most=most_words)
    found = memories_found(
        user_id=user.pk,
        query=query,
        limit=limit,
        exclude_category=exclude_category,
        exclude_digest=None if exclude_key is None else key_digest(user.pk, exclude_key),
        in_use_only=in_use_only,
    )
    return [SimilarMemory(memory=f.memory, similarity=f.similarity, why=f.why) for f in found]


def memory_by_key_and_similar(
    *,
    user: User,
    key: str,
    vector: list[float],
    model: str,
    limit: int,
    text: str = "",
    exclude_category: str | None = None,
    in_use_only: bool = False,
) -> tuple[Memory | None, list[SimilarMemory]]:
    """memory_by_key, and memories_by_similarity leaving that memory out: what a save by
    key compares itself with."""
    keyed = memory_by_key(user=user, key=key, in_use_only=in_use_only)
    nearest = memories_by_similarity(
        user=user,
        vector=vector,
        model=model,
        limit=limit,
        text=text,
        exclude_category=exclude_category,
        in_use_only=in_use_only,
        exclude_key=key,
    )
    return keyed, nearest


def memories_of_another_model(*, user: User, model: str) -> bool:
    """Whether any of the person's memories is embedded by another model than `model`, or
    not at all: a comparison by `model` would not see it."""
    return Memory.objects.filter(user=user).exclude(embedding_model=model, embedding__isnull=False).exists()


def memories_by_keys(*, user: User, keys: list[str], in_use_only: bool = False) -> list[Memory]:
    """The person's memories named by `keys`, in that order; unknown keys are left out."""
    digests = {key_digest(user.pk, key): key for key in keys}
    memories = memory_list_for_user(user=user, in_use_only=in_use_only).filter(key_digest__in=digests)
    found = {digests[m.key_digest]: m for m in memories}
    return [found[key] for key in dict.fromkeys(keys) if key in found]


def memories_learned_in(*, user: User, message_ids: list[int]) -> list[Memory]:
    """The person's memories whose latest save by the coach came from one of these chat
    messages (their provenance), oldest first, with their summary and dates only: what a
    conversation's page shows as kept."""
    if not message_ids:
        return []
    memories = Memory.objects.filter(user=user, message_id__in=message_ids)
    return list(memories.only("summary", "message_id", "created_at", "updated_at").order_by("created_at", "pk"))


def proposals_for_user(*, user: User) -> QuerySet[MemoryProposal]:
    """Every suggestion the coach made to the person, answered or not."""
    return MemoryProposal.objects.filter(user=user).select_related("memory")


def pending_proposals_for_user(*, user: User) -> QuerySet[MemoryProposal]:
    return (
        MemoryProposal.objects.filter(user=user, status=MemoryProposal.Status.PENDING)
        .select_related("memory")
        .order_by("created_at")
    )


def recently_forgotten_for_user(*, user: User, now: datetime, days: int) -> QuerySet[MemoryEvent]:
    """Evictions of the last `days` days that can still be undone, newest first.

    One query: an eviction counts only while it is the last thing that happened to its
    memory (not restored, changed, evicted again or deleted since), the memory is not
    stored, and its snapshot is still there (a person's deletion blanks it).
    """
    later = MemoryEvent.objects.filter(
        user=user, memory_id=OuterRef("memory_id"), created_at__gt=OuterRef("created_at")
    )
    stored = Memory.objects.filter(user=user, pk=OuterRef("memory_id"))
    return (
        MemoryEvent.objects.filter(
            user=user,
            action=MemoryEvent.Action.EVICTED,
            created_at__gte=now - timedelta(days=days),
            before__isnull=False,
        )
        .exclude(Exists(later))
        .exclude(Exists(stored))
        .order_by("-created_at", "-pk")
    )


def memory_history_for_user(*, user: User, memory_id: int) -> QuerySet[MemoryEvent]:
    """Every event of one of the person's memories, oldest first; it outlives the memory."""
    return MemoryEvent.objects.filter(user=user, memory_id=memory_id).order_by("created_at", "pk")


def overlaps_for_user(*, user: User) -> QuerySet[MemoryOverlap]:
    """Pairs of the person's memories that read alike and await their word, newest first."""
    return (
        MemoryOverlap.objects.filter(user=user, dismissed_at__isnull=True)
        .select_related("memory", "other")
        .defer("memory__embedding", "other__embedding")
        .order_by("-created_at", "-pk")
    )


def staff_viewings_for_user(*, user: User, limit: int = 50) -> list[PrivateTextViewing]:
    """When staff opened the person's private text in the admin, and why: newest first."""
    return list(PrivateTextViewing.objects.filter(person=user).order_by("-viewed_at", "-pk")[:limit])


def memory_events_after(*, user: User, event_id: int) -> list[MemoryEvent]:
    """What happened to the person's memories after the event `event_id`, oldest first: what
    a conversation's prompt, assembled then, learns of as notes."""
    return list(MemoryEvent.objects.filter(user=user, pk__gt=event_id).order_by("pk"))


def newest_memory_event_id(*, user: User) -> int:
    """The id of the person's newest memory event (0 for none): what a prompt assembled now
    reflects, so what comes after it is a note."""
    return MemoryEvent.objects.filter(user=user).order_by("-pk").values_list("pk", flat=True).first() or 0


def intentions_due_between(*, user: User, after: datetime, until: datetime, lead: timedelta) -> list[Memory]:
    """The person's open intentions that came due (`lead` before their date) in (after, until]."""
    return list(
        memory_list_for_user(user=user)
        .filter(tier=Tier.PROSPECTIVE, status=ProspectiveStatus.OPEN, due_at__gt=after + lead, due_at__lte=until + lead)
        .order_by("due_at", "pk")
    )


def next_intention_due_after(*, user: User, moment: datetime, lead: timedelta) -> datetime | None:
    """When the person's next open intention not yet due at `moment` comes due."""
    due_at = (
        Memory.objects.filter(user=user, tier=Tier.PROSPECTIVE, status=ProspectiveStatus.OPEN, due_at__gt=moment + lead)
        .order_by("due_at")
        .values_list("due_at", flat=True)
        .first()
    )
    return None if due_at is None else due_at - lead
