"""Stores and people the benchmarks share."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from django.conf import settings
from psycopg import Cursor

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


def copy_people(cursor: Cursor, people: Sequence[tuple[str, str]], *, now: datetime) -> list[int]:
    """People written with COPY, as no app path could write thousands of them in the time:
    (email, time zone) each, with no usable password; their ids, in the order given."""
    with cursor.copy(
        "COPY accounts_user (password, email, name, is_staff, is_active, is_superuser, date_joined, time_zone) "
        "FROM STDIN"
    ) as copy:
        for email, zone in people:
            copy.write_row(["!", email, "", False, True, False, now, zone])
    cursor.execute("SELECT id FROM accounts_user WHERE email = ANY(%s) ORDER BY id", [[email for email, _ in people]])
    return [row[0] for row in cursor.fetchall()]
