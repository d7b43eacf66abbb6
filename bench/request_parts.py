"""Where a request's tokens go: the tool schemas, the instructions, the person's "Today",
the memory block, the notes of what changed in memory, the history, the turn's own tool
rounds and the new message. Tokens are the offline coach's (words and punctuation), the
same count in every benchmark, so figures compare across runs and changes."""

from __future__ import annotations

import json
from typing import Any

from offline_coach.wire import TOKEN

# How a note of what changed in memory is told apart from the rest of the history.
NOTE_CALL_PREFIX = "memory-note"


def count(text: str) -> int:
    return len(TOKEN.findall(text))


def is_note(message: dict[str, Any]) -> bool:
    """A note of what changed in memory: a system message after the first, or one of the
    app's own tool rounds that carry notes."""
    if message["role"] == "system":
        return True
    calls = message.get("tool_calls") or []
    return any(str(call.get("id", "")).startswith(NOTE_CALL_PREFIX) for call in calls) or str(
        message.get("tool_call_id", "")
    ).startswith(NOTE_CALL_PREFIX)


def composition(body: dict[str, Any]) -> dict[str, int]:
    """A chat request's tokens, part by part."""
    system = body["messages"][0]["content"]
    instructions, _, rest = system.partition("\n\nToday: ")
    today, _, block = rest.partition("\n\n")
    later = body["messages"][1:]
    # The turn's own rounds: what follows the person's last message (tool calls and results).
    last_person = max((i for i, m in enumerate(later) if m["role"] == "user"), default=len(later) - 1)
    history, new, rounds = later[:last_person], later[last_person], later[last_person + 1 :]
    return {
        "tools": count(json.dumps(body.get("tools") or [], sort_keys=True)),
        "instructions": count(instructions),
        "today": count("Today: " + today),
        "memory block": count(block),
        "notes": sum(_tokens(m) for m in history if is_note(m)),
        "history": sum(_tokens(m) for m in history if not is_note(m)),
        "the new message": _tokens(new),
        "this turn's tool rounds": sum(_tokens(m) for m in rounds),
    }


def _tokens(message: dict[str, Any]) -> int:
    calls = json.dumps(message.get("tool_calls") or [], sort_keys=True) if message.get("tool_calls") else ""
    return count(message.get("content") or "") + count(calls)
