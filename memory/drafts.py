"""A memory's fields as a writer wants them, the rules they must follow, and the errors a
write can end in (each fit to show whoever wrote: the person, or the model as a tool result).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from memory.models import KEY_MAX_CHARS, SUMMARY_MAX_CHARS, Category, Memory, ProspectiveStatus, Tier
from paste_splitter.categories import Heading, guess_category

KEY_PATTERN = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


class MemoryWriteError(Exception):
    """A write that cannot be made; the message is fit to show the writer."""


class MemoryInvalid(MemoryWriteError):
    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{field}: {message}" for field, message in errors.items()))
        self.errors = errors


class MemoryNotFound(MemoryWriteError):
    pass


class MemoryIsProtected(MemoryWriteError):
    """The coach tried to rewrite or delete a memory only the user may change."""


class ProposalOutdated(MemoryWriteError):
    pass


class MemoryNotRestorable(MemoryWriteError):
    """A forgotten memory that cannot come back: too old, already back, or its key taken."""


class MemoryNoRoom(MemoryWriteError):
    """A coach write refused by the ceiling rule (memory.policy, rule 4): the store holds
    all it may, and nothing in it may be forgotten to make room."""


class MemoryFull(MemoryWriteError):
    """A write of the person's refused because they keep the most memories one person may
    (MEMORY_MAX_PER_PERSON; memory.policy, rule 5): the message says so, to them."""


class MemoryOff(MemoryWriteError):
    """A coach write while the person has memory off (turned off while the model wrote)."""


class MemoryChanged(MemoryWriteError):
    """The memory changed after the writer read it; `memory` is how it stands now."""

    def __init__(self, message: str, *, memory: Memory) -> None:
        super().__init__(message)
        self.memory = memory


class ProposalDecided(MemoryWriteError):
    """The suggestion was answered already (another tab, a double click), or its memory is gone."""


@dataclass(frozen=True)
class MemoryDraft:
    """A memory's fields as a writer wants them."""

    key: str
    tier: str
    category: str
    summary: str
    content: str
    due_at: datetime | None = None
    status: str = ""
    # Only the month of `due_at` is known (see Memory.due_month_only).
    due_month_only: bool = False

    def to_json(self) -> str:
        return json.dumps(
            {
                "key": self.key,
                "tier": self.tier,
                "category": self.category,
                "summary": self.summary,
                "content": self.content,
                "due_at": self.due_at.isoformat() if self.due_at else None,
                "due_month_only": self.due_month_only,
                "status": self.status,
            }
        )

    @classmethod
    def from_fields(cls, fields: dict[str, Any]) -> MemoryDraft:
        return cls(
            key=fields["key"],
            tier=fields["tier"],
            category=fields["category"],
            summary=fields["summary"],
            content=fields["content"],
            due_at=parse_datetime(fields["due_at"]) if fields.get("due_at") else None,
            status=fields.get("status") or "",
            due_month_only=bool(fields.get("due_month_only")),
        )

    @classmethod
    def of(cls, memory: Memory) -> MemoryDraft:
        return cls(
            key=memory.key,
            tier=memory.tier,
            category=memory.category,
            summary=memory.summary,
            content=memory.content,
            due_at=memory.due_at,
            status=memory.status,
            due_month_only=memory.due_month_only,
        )


FEEDBACK_LINES = {"Why:": "why (the incident behind the rule)", "How to apply:": "when and how it applies"}


def feedback_missing(draft: MemoryDraft) -> list[str]:
    """What a feedback memory lacks of its shape (seed 002): after the rule, a `Why:` line and
    a `How to apply:` line. A rule without its reason goes brittle when a case differs."""
    if draft.category != Category.FEEDBACK:
        return []
    lines = [line.strip().lower() for line in draft.content.splitlines()]
    return [
        f"a line starting '{start}' saying {what}"
        for start, what in FEEDBACK_LINES.items()
        if not any(line.startswith(start.lower()) for line in lines)
    ]


def validate_draft(draft: MemoryDraft, *, now: datetime, due_may_be_past: bool = False) -> MemoryDraft:
    """The draft with its text tidied, or MemoryInvalid naming every problem."""
    draft = replace(
        draft, key=draft.key.strip(), summary=" ".join(draft.summary.split()), content=draft.content.strip()
    )
    errors: dict[str, str] = {}
    if not KEY_PATTERN.match(draft.key) or len(draft.key) > KEY_MAX_CHARS:
        errors["key"] = f"use lowercase words joined by hyphens, at most {KEY_MAX_CHARS} characters"
    if draft.tier not in Tier.values:
        errors["tier"] = f"must be one of {', '.join(Tier.values)}"
    if draft.category not in Category.values:
        errors["category"] = f"must be one of {', '.join(Category.values)}"
    if not draft.summary:
        errors["summary"] = "must not be empty"
    elif len(draft.summary) > SUMMARY_MAX_CHARS:
        errors["summary"] = f"is {len(draft.summary)} characters; at most {SUMMARY_MAX_CHARS}"
    if not draft.content:
        draft = replace(draft, content=draft.summary)
    elif len(draft.content) > settings.MEMORY_CONTENT_MAX_CHARS:
        errors["content"] = f"is {len(draft.content)} characters; at most {settings.MEMORY_CONTENT_MAX_CHARS}"
    if draft.tier == Tier.PROSPECTIVE:
        # An intention may have no date ("come back to your pacing at some point"): it is
        # brought up at the next conversation instead, and never emailed about.
        if draft.due_at is not None and timezone.is_naive(draft.due_at):
            errors["due_at"] = "give a time zone (for example 2026-06-01T09:00:00Z)"
        elif draft.due_at is not None and _over(draft) <= now and not due_may_be_past:
            errors["due_at"] = "is in the past; a prospective memory is about something still to come"
        if draft.status not in ProspectiveStatus.values:
            draft = replace(draft, status=ProspectiveStatus.OPEN)
    else:
        if draft.due_at is not None:
            errors["due_at"] = "only prospective memories have a due date"
        draft = replace(draft, status="")
    if draft.due_at is None:
        draft = replace(draft, due_month_only=False)
    if errors:
        raise MemoryInvalid(errors)
    return draft


EPISODES_ARE_THE_WEEKS = "a weekly summary is written by the app itself, once a week: choose another category"


def refuse_new_episode(draft: MemoryDraft, *, was: str | None) -> None:
    """A memory becomes a weekly episode only by the weekly job (memory.episodes): a note
    filed as one would push a real week out of the newest MEMORY_MAX_EPISODES, never to be
    written again. One that is an episode already (`was`) may stay one."""
    if draft.category == Category.EPISODE and was != Category.EPISODE:
        raise MemoryInvalid({"category": EPISODES_ARE_THE_WEEKS})


def _over(draft: MemoryDraft) -> datetime:
    """When a due date has passed: its moment, or for a month (due_month_only) its end."""
    assert draft.due_at is not None
    if not draft.due_month_only:
        return draft.due_at
    first = draft.due_at
    return first.replace(year=first.year + first.month // 12, month=first.month % 12 + 1)


def category_from_words(text: str, *, suggested: str | None = None) -> str:
    """The category a fact's own words name, as the import files a pasted fact: a safety
    topic (allergy, injury, medical, a constraint) first and only on its safety words, then
    `suggested` (a model's guess at another topic), then the other topics, `other` when none."""
    return guess_category(text, heading=Heading(), suggested=suggested)
