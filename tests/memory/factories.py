"""Memories written straight to the database, for tests about reading and evicting them."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from accounts.models import User
from memory.embeddings import memory_text
from memory.models import Memory
from offline_coach import bag_of_words_embedding


def make_memory(
    user: User,
    key: str,
    *,
    source: str = "coach",
    category: str = "habit",
    tier: str = "episodic",
    summary: str | None = None,
    content: str | None = None,
    updated_at: datetime | None = None,
    due_at: datetime | None = None,
    status: str = "",
) -> Memory:
    summary = summary or f"Note about {key.replace('-', ' ')}"
    content = content or summary
    at = updated_at or timezone.now()
    return Memory.objects.create(
        user=user,
        key=key,
        tier=tier,
        category=category,
        source=source,
        summary=summary,
        content=content,
        embedding=bag_of_words_embedding(memory_text(summary=summary, content=content)),
        embedding_model="bag-of-words",
        due_at=due_at,
        status=status or ("open" if tier == "prospective" else ""),
        created_at=at,
        updated_at=at,
    )


def make_memories(user: User, count: int, *, prefix: str = "note", start: datetime | None = None) -> list[Memory]:
    """`count` unprotected coach notes, a minute apart, oldest first."""
    start = start or timezone.now() - timedelta(days=30)
    return [
        make_memory(user, f"{prefix}-{i}", summary=f"{prefix} number {i}", updated_at=start + timedelta(minutes=i))
        for i in range(count)
    ]


def memory_named(user: User, key: str) -> Memory:
    """The person's memory named `key` (keys are encrypted: found by their digest)."""
    return Memory.objects.keyed(user.pk, key).get()
