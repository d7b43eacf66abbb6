"""Stores the benchmarks share."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings

from accounts.models import User
from infra.llm import Embedding
from memory.drafts import MemoryDraft
from memory.services import memory_save


def fill_with_longest_protected_notes(user: User, embedding_for: Callable[[int], Embedding]) -> None:
    """The worst store a coach can build: MEMORY_MAX_STORED protected notes (medical, so
    never evicted) with the longest summary and content allowed."""
    for n in range(settings.MEMORY_MAX_STORED):
        draft = MemoryDraft(
            key=f"medical-{n + 1}",
            tier="profile",
            category="medical",
            summary=("S" * 146) + f"{n:04d}",
            content="C" * settings.MEMORY_CONTENT_MAX_CHARS,
        )
        memory_save(user=user, draft=draft, source="coach", actor="coach", embedding=embedding_for(n))
