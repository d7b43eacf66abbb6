"""The memory store's upkeep, run by the scheduler (and, for one person, before a
comparison that needs it): embeddings brought up to EMBEDDING_MODEL, and the history kept
within its bounds."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from infra import llm
from infra.llm import Embedding
from memory.embeddings import memory_text
from memory.models import Memory, MemoryEvent
from memory.read_until import read_since, read_until_set
from memory.store import memory_event

if TYPE_CHECKING:
    from accounts.models import User

Actor = MemoryEvent.Actor
# A history passes its bound only as it grows: the nightly pruning looks at the people whose
# history grew since it last ran (memory/read_until.py), or within this on its first run.
HISTORY_GREW_WITHIN = timedelta(days=3)
HISTORY_PRUNED = "history pruned"
# Forgotten memories whose histories lose their text in one statement.
PRUNE_BATCH = 200


def memories_reembed(*, batch_size: int = 100, user: User | None = None) -> int:
    """Re-embed every memory (of `user`, if given) whose embedding is missing or from another
    model, in batches: one embedding request and a few statements a batch. Never inside a
    transaction while it waits on the model.

    A row edited while its batch was being embedded keeps its newer embedding: only rows
    still at the version their text was read at are updated, locked as they are.
    """
    model = settings.EMBEDDING_MODEL
    # Written as ranges either side of the model, not "not this model", so an index finds
    # the few stale rows among everyone's (nothing to do costs the same for any number).
    stale = Memory.objects.filter(
        Q(embedding__isnull=True) | Q(embedding_model__lt=model) | Q(embedding_model__gt=model)
    )
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

    Each reads only what may be due, through an index: evictions whose note is still in
    their history, and the people whose history grew since the last run (a history only
    passes its bound as it grows: what it keeps past it is at most what was still inside
    the restore window when it last grew), so a night with nothing to do costs the same
    whatever the number of people.
    """
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.MEMORY_FORGOTTEN_DAYS)
    later = MemoryEvent.objects.filter(
        user_id=OuterRef("user_id"), memory_id=OuterRef("memory_id"), created_at__gt=OuterRef("created_at")
    )
    stored = Memory.objects.filter(pk=OuterRef("memory_id"))
    beyond_restore = list(
        MemoryEvent.objects.filter(action=MemoryEvent.Action.EVICTED, before__isnull=False, created_at__lt=cutoff)
        .exclude(Exists(later))
        .exclude(Exists(stored))
        # Without the events' default order, which would make each event its own row.
        .order_by()
        .values_list("user_id", "memory_id")
        .distinct()
    )
    with transaction.atomic():
        dropped = 0
        for start in range(0, len(beyond_restore), PRUNE_BATCH):
            # Each memory's history is read through its person's index of histories.
            histories = Q()
            for user_id, memory_id in beyond_restore[start : start + PRUNE_BATCH]:
                histories |= Q(user_id=user_id, memory_id=memory_id)
            text_bearing = MemoryEvent.objects.filter(histories).filter(
                Q(key__isnull=False) | Q(before__isnull=False) | Q(after__isnull=False)
            )
            dropped += text_bearing.exclude(action=MemoryEvent.Action.EVICTED).update(
                key=None, before=None, after=None, reason=""
            ) + text_bearing.update(key=None, before=None, after=None)
        since = read_since(HISTORY_PRUNED, now=now, lookback=HISTORY_GREW_WITHIN)
        grew = list(
            MemoryEvent.objects.filter(created_at__gte=since).order_by().values_list("user_id", flat=True).distinct()
        )
        deleted = 0
        if grew:
            with connection.cursor() as cursor:
                # Per person whose history grew lately, events past the newest N that are
                # also past the restore window.
                cursor.execute(
                    """DELETE FROM memory_memoryevent WHERE id IN (
                        SELECT id FROM (
                            SELECT id, created_at,
                                   ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY created_at DESC, id DESC) AS newest
                            FROM memory_memoryevent
                            WHERE user_id = ANY(%s)
                        ) ranked
                        WHERE ranked.newest > %s AND ranked.created_at < %s
                    )""",
                    [grew, settings.MEMORY_HISTORY_MAX_EVENTS, cutoff],
                )
                deleted = cursor.rowcount
        read_until_set(HISTORY_PRUNED, now=now)
    return dropped, deleted
