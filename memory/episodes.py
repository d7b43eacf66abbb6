"""Weekly episodes: the model's summary of a person's week, kept as an episode memory.

The eviction policy keeps the newest MEMORY_MAX_EPISODES of them. The week's sessions come
from the caller (the scheduler, which reads the chat's sessions): memory knows no chat.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from django.conf import settings

from infra import llm
from infra.prompts import prompt
from memory.drafts import MemoryDraft
from memory.models import SUMMARY_MAX_CHARS, Category, Memory, MemoryEvent, Source, Tier
from memory.services import memory_save

if TYPE_CHECKING:
    from accounts.models import User

Actor = MemoryEvent.Actor


@dataclass(frozen=True)
class SessionOfWeek:
    """One summarised session of the week, as the model is shown it."""

    day: str  # the person's own day: "Tuesday 2026-12-01"
    summary: str


def weekly_episode_text(*, week_key: str, sessions: Sequence[SessionOfWeek]) -> str:
    """Have the model summarise the person's week (`week_key`, "week-2026-48") from its
    sessions' summaries. The model is called outside any transaction; the caller keeps
    the text (weekly_episode_save), once per week."""
    _, year, week = week_key.split("-")
    lines = [f"- {session.day}: {' '.join(session.summary.split())}" for session in sessions]
    return llm.complete(
        [
            {"role": "system", "content": prompt("memory", "weekly_episode")},
            {"role": "user", "content": f"The sessions of week {year}-{week}:\n" + "\n".join(lines)},
        ]
    )


def weekly_episode_save(*, user: User, key: str, text: str, now: datetime | None = None) -> Memory:
    """Keep the model's summary of a week as the person's weekly episode under `key`
    ("week-2026-48"). The eviction policy, applied in the same transaction, keeps the
    newest MEMORY_MAX_EPISODES of them."""
    content = text.strip()[: settings.MEMORY_CONTENT_MAX_CHARS]
    summary = _first_sentence(content, limit=SUMMARY_MAX_CHARS)
    draft = MemoryDraft(key=key, tier=Tier.EPISODIC, category=Category.EPISODE, summary=summary, content=content)
    outcome = memory_save(
        user=user,
        draft=draft,
        source=Source.COACH,
        actor=Actor.COACH,
        reason="the week, summarised",
        weekly_episode=True,
        now=now,
    )
    return outcome.memory


def _first_sentence(text: str, *, limit: int) -> str:
    # The index line of a longer note: its first sentence, cut at a word if need be.
    first = re.split(r"(?<=[.!?])\s", " ".join(text.split()), maxsplit=1)[0]
    if len(first) <= limit:
        return first
    return first[: limit - 1].rsplit(" ", 1)[0].rstrip(",;:") + "\u2026"
