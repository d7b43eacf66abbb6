"""The rule-based coach: what it answers a chat completion request with. Deterministic.

A chat turn whose last message is the user's, with `save_memory` offered, calls it once
per memory-worthy statement. After tool results it answers in words, unless a save was
flagged as a near-copy: then, once per user message, it answers the flag. Notes that
single out different facts (another month, another day, the other side, another number,
another topic) are kept apart with `keep_separate`; the rest are merged into the existing
memory with `update_memory`. Summaries, emails and weekly episodes are answered in words;
a memory import with the facts of the pasted text as JSON, one per line or bullet. Asked
about an earlier conversation ("do you remember when...", "what did I say about..."), with
`search_conversations` offered, it looks back and answers from what it finds.
"""

from __future__ import annotations

import json
import re
from dataclasses import fields, replace
from datetime import date
from typing import Any

from offline_coach.chat import chat_reply
from offline_coach.documents import follow_up_email, session_summary, weekly_episode
from offline_coach.facts import pasted_facts
from offline_coach.look_back import SEARCH, answer_from, look_back_call, looked_back
from offline_coach.prompt import (
    CallResult,
    Kind,
    Remembered,
    as_remembered,
    callable_tools,
    called_since_user,
    latest_round,
    remembered,
    request_kind,
    stated_today,
    text_of,
)
from offline_coach.reply import Reply, ToolCall
from offline_coach.statements import notes_in

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
DELETE = "delete_memory"
GIVEN_UP = re.compile(
    r"\bi(?:'ve| have)?\s+(?:dropped|given up on|given up|gave up on|gave up|quit|abandoned|ditched"
    r"|decided against|(?:am|'m) (?:no longer|not) (?:doing|entering|going for|training for))\s+([^,.;!?]+)",
    re.IGNORECASE,
)
GIVEN_UP_FILLERS = frozenset({"the", "my", "a", "an", "idea", "of", "on", "plan", "to", "for", "that", "this"})
# What may be let go of when the person says so; never what keeps them safe.
LET_GO = frozenset({"goal", "project", "schedule", "habit", "preference", "other"})
# The longest reason the app takes from a model; a server of its own, it cannot import the app's.
REASON_CHARS = 300
MERGE_REASON = "The user said this again in other words; merged into the existing memory instead of a duplicate."

DOCUMENTS = {
    Kind.SESSION_SUMMARY: session_summary,
    Kind.WEEKLY_EPISODE: weekly_episode,
    Kind.FOLLOW_UP_EMAIL: follow_up_email,
    Kind.MEMORY_IMPORT: pasted_facts,
}


def respond(body: dict[str, Any], *, today: date) -> Reply:
    """The coach's answer to a chat completion request; `today` unless the prompt states a date."""
    messages: list[dict[str, Any]] = body.get("messages") or []
    today = stated_today(messages) or today
    kind = request_kind(messages)
    if kind in DOCUMENTS:
        return Reply(text=DOCUMENTS[kind](messages, today=today))
    return _chat_turn(body, messages, today)


def _chat_turn(body: dict[str, Any], messages: list[dict[str, Any]], today: date) -> Reply:
    tools = callable_tools(body)
    last = messages[-1] if messages else {}
    if last.get("role") == "user" and SEARCH in tools and (look := look_back_call(text_of(last))):
        # Asked about an earlier conversation: looked back first, answered from what it finds.
        return Reply(tool_calls=(look,))
    if last.get("role") == "user":
        saves = notes_in(text_of(last), today=today) if SAVE in tools else []
        drops = given_up(text_of(last), remembered(messages)) if DELETE in tools else []
        if saves or drops:
            return Reply(
                tool_calls=(*(ToolCall(SAVE, json.dumps(note.arguments())) for note in saves), *drops),
            )
    latest = latest_round(messages) if last.get("role") == "tool" else []
    if (found := looked_back(latest)) is not None:
        return Reply(text=answer_from(found))
    if UPDATE in tools and not called_since_user(messages, UPDATE) and (answers := _answer_flags(latest)):
        return Reply(tool_calls=answers)
    known = remembered(messages)
    return Reply(
        text=chat_reply(
            user_text=_last_user_text(messages),
            just_told=_just_told(latest, known),
            remembered=known,
        )
    )


def _just_told(latest: list[CallResult], known: list[Remembered]) -> list[Remembered]:
    """What the latest round wrote down; an update reads as the memory it changed."""
    by_key = {item.key: item for item in known}
    told = []
    for call in latest:
        if call.name not in {SAVE, UPDATE}:
            continue
        changes = {name: value for name, value in call.arguments.items() if value is not None}
        earlier = by_key.get(str(changes.get("key")))
        told.append(replace(earlier, **_fields(changes)) if call.name == UPDATE and earlier else as_remembered(changes))
    return told


def _fields(changes: dict[str, Any]) -> dict[str, Any]:
    names = {field.name for field in fields(Remembered)}
    return {name: value for name, value in changes.items() if name in names and isinstance(value, str)}


def _answer_flags(latest: list[CallResult]) -> tuple[ToolCall, ...]:
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


def given_up(text: str, known: list[Remembered]) -> list[ToolCall]:
    """A `delete_memory` for each remembered goal, project or plan the person says they have
    dropped ("I've dropped the short story contest", "I gave up on the marathon"): every
    word they name it by is in its summary. Safety notes are never let go of this way."""
    calls = []
    for said in GIVEN_UP.finditer(text):
        words = set(re.findall(r"[a-z0-9]+", said.group(1).lower())) - GIVEN_UP_FILLERS
        for item in known:
            if words and item.category in LET_GO and words <= set(re.findall(r"[a-z0-9]+", item.summary.lower())):
                reason = f'The person said they dropped it: "{said.group(0).strip()}"'
                calls.append(ToolCall(DELETE, json.dumps({"key": item.key, "reason": reason[:REASON_CHARS]})))
    return calls


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


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    return next((text_of(message) for message in reversed(messages) if message.get("role") == "user"), "")
