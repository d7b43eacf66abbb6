"""The memory store's upkeep, run by the scheduler (and, for one person, before a
comparison that needs it): embeddings brought up to EMBEDDING_MODEL, and the history kept
within its bounds."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q, Subquery
from django.utils import timezone

from infra import llm
from infra.llm import Embedding
from memory.embeddings import memory_text
from memory.models import Memory, MemoryEvent
from memory.store import memory_event

if TYPE_CHECKING:
    from accounts.models import User

Actor = MemoryEvent.Actor


def memories_reembed(*, batch_size: int = 100, user: User | None = None) -> int:
    """Re-embed every memory (of `user`, if given) whose embedding is missing or from another
    model, in batches: one embedding request and a few statements a batch. Never inside a
    transaction while it waits on the model.

    A row edited while its batch was being embedded keeps its newer embedding: only rows
    still at the version their text was read at are updated, locked as they are.
    """
    model = settings.EMBEDDING_MODEL
    stale = Memory.objects.exclude(embedding_model=model, embedding__isnull=False)
    if user is not None:
        stale = stale.filter(user=user)
    done, after_pk = 0, 0
    while True:
        batch = list(stale.filter(pk__gt=after_pk).order_by("pk").defer("embedding")[:batch_size])
        if not batch:
            return done
        vectors = llm.embed([memory_text(summary=m.summary, content=m.content) for m in batch])
        done += _embeddings_keep(batch, vectors)
        after_pk = batch[-1].pk


def _embeddings_keep(batch: list[Memory], vectors: list[Embedding]) -> int:
    now = timezone.now()
    with transaction.atomic():
        current = dict(
            Memory.objects.select_for_update().filter(pk__in=[m.pk for m in batch]).values_list("pk", "version")
        )
        kept = []
        for memory, embedding in zip(batch, vectors, strict=True):
            if current.get(memory.pk) == memory.version:
                memory.embedding, memory.embedding_model = embedding.vector, embedding.model
                kept.append(memory)
        Memory.objects.bulk_update(kept, ["embedding", "embedding_model"])
        MemoryEvent.objects.bulk_create(
            memory_event(m, actor=Actor.SYSTEM, action=MemoryEvent.Action.REEMBEDDED, reason=m.embedding_model, now=now)
            for m in kept
        )
    return len(kept)


def memory_history_prune(*, now: datetime | None = None) -> tuple[int, int]:
    """Bound what the history keeps. Returns (events whose text was dropped, events deleted).

    1. Once a forgotten memory can no longer be restored (MEMORY_FORGOTTEN_DAYS after it was
       evicted), the text of its history goes: its key, snapshots and the reasons written
       for it. What happened, and when, stays.
    2. A person's history keeps its newest MEMORY_HISTORY_MAX_EVENTS events, and of the
       older ones only those still inside the restore window.
    """
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.MEMORY_FORGOTTEN_DAYS)
    later = MemoryEvent.objects.filter(
        user_id=OuterRef("user_id"), memory_id=OuterRef("memory_id"), created_at__gt=OuterRef("created_at")
    )
    stored = Memory.objects.filter(pk=OuterRef("memory_id"))
    beyond_restore = (
        MemoryEvent.objects.filter(action=MemoryEvent.Action.EVICTED, created_at__lt=cutoff)
        .exclude(Exists(later))
        .exclude(Exists(stored))
        .values("memory_id")
    )
    with transaction.atomic():
        text_bearing = MemoryEvent.objects.filter(memory_id__in=Subquery(beyond_restore)).filter(
            Q(key__isnull=False) | Q(before__isnull=False) | Q(after__isnull=False)
        )
        dropped = text_bearing.exclude(action=MemoryEvent.Action.EVICTED).update(
            key=None, before=None, after=None, reason=""
        ) + text_bearing.update(key=None, before=None, after=None)
        with connection.cursor() as cursor:
            # Per person, events past the newest N that are also past the restore window.
            cursor.execute(
                """DELETE FROM memory_memoryevent WHERE id IN (
                    SELECT id FROM (
                        SELECT id, created_at,
                               ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY created_at DESC, id DESC) AS newest
                        FROM memory_memoryevent
                    ) ranked
                    WHERE ranked.newest > %s AND ranked.created_at < %s
                )""",
                [settings.MEMORY_HISTORY_MAX_EVENTS, cutoff],
            )
            deleted = cursor.rowcount
    return dropped, deleted
