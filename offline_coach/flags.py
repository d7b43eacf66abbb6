"""A save the app flagged as a near-copy of a kept memory, answered as a model would: kept
apart when the two notes single out different facts (another month, another day, the
other side, another number, another topic), else merged into the kept memory with
`update_memory`."""

from __future__ import annotations

import json
import re
from typing import Any

from offline_coach.prompt import CallResult
from offline_coach.reply import ToolCall

# What singles one fact out from another that reads alike.
DISTINCT = re.compile(
    r"\b(january|february|march|april|may|june|july|august|september|october|november|december"
    r"|monday|tuesday|wednesday|thursday|friday|saturday|sunday|left|right|\d+(?:[.,]\d+)?)\b"
)
NEUTRAL_TOPICS = frozenset(
    {
        "injury", "safety", "medical", "allergy", "constraint", "background", "preference", "goal", "habit",
        "schedule", "feedback", "project", "reference", "episode", "other", "week",
    }
)  # fmt: skip
SAVE = "save_memory"
UPDATE = "update_memory"
# Reasons are shown to the person (a memory's history, a suggestion): written to them.
MERGE_REASON = "You said this again in other words, so it went into the note already kept."


def answer_flags(latest: list[CallResult]) -> tuple[ToolCall, ...]:
    """For each save flagged as a near-copy: the same save kept apart when the two notes are
    different facts, else an `update_memory` merging it into its first duplicate."""
    answers: dict[str, ToolCall] = {}
    for call in latest:
        duplicate = _first_duplicate(call)
        if call.name != SAVE or duplicate is None:
            continue
        if different_facts(call.arguments, duplicate):
            answers[f"keep:{call.arguments.get('key')}"] = ToolCall(
                SAVE, json.dumps({**call.arguments, "keep_separate": True})
            )
        elif duplicate["key"] not in answers:
            answers[duplicate["key"]] = ToolCall(UPDATE, json.dumps(_merge_arguments(call.arguments, duplicate)))
    return tuple(answers.values())


def different_facts(new: dict[str, Any], existing: dict[str, Any]) -> bool:
    """Whether a flagged note and the memory it looks like are two facts: each singles out
    something the other does not (a month, a day, a side, a number), the note has a date
    the other lacks, or their keys name different topics."""
    new_text = f"{new.get('summary') or ''} {new.get('content') or ''}".lower()
    old_text = str(existing.get("summary") or "").lower()
    new_marks, old_marks = set(DISTINCT.findall(new_text)), set(DISTINCT.findall(old_text))
    if new_marks and old_marks and new_marks != old_marks:
        return True
    if new.get("due_at") and not old_marks:
        # A date to raise ("the race is on 12 April") beside the undated goal it serves:
        # merged, the date would be lost (only prospective memories carry one).
        return True
    new_topic = str(new.get("key") or "").split("-")[0]
    old_topic = str(existing.get("key") or "").split("-")[0]
    return bool(new_topic and old_topic) and new_topic != old_topic and not _neutral(old_topic)


def _neutral(topic: str) -> bool:
    # A neutral key ("injury-2") names a category, not a topic: it says nothing about sameness.
    return topic in NEUTRAL_TOPICS


def _first_duplicate(call: CallResult) -> dict[str, Any] | None:
    duplicates = call.result.get("duplicates") if isinstance(call.result, dict) else None
    if not isinstance(duplicates, list):
        return None
    return next((item for item in duplicates if isinstance(item, dict) and isinstance(item.get("key"), str)), None)


def _merge_arguments(refused: dict[str, Any], existing: dict[str, Any]) -> dict[str, Any]:
    new_content = str(refused.get("content") or refused.get("summary") or "")
    old_content = str(existing.get("content") or existing.get("summary") or "")
    content = new_content if not old_content or old_content in new_content else f"{old_content}\n{new_content}"
    return {
        "key": existing["key"],
        "summary": refused.get("summary"),
        "content": content,
        "tier": None,
        "category": None,
        "due_at": refused.get("due_at"),
        "status": None,
        "clear": None,
        "reason": MERGE_REASON,
    }
