"""Reading a chat completion request the way the app writes its prompts.

The offline coach relies on these conventions, and only these:

- The first line of the first system message names the request: `# Coach` (a chat turn),
  `# Session summary`, `# Follow-up email`, `# Weekly episode` or `# Memory import` (the
  last user message is another assistant's answer, pasted, to split into facts); anything
  else is a chat turn.
- A line `Today: YYYY-MM-DD` in a system message is today's date.
- A memory is a line under a topic's heading (`## goal`), `- key (by them, 3 Dec): summary`,
  maybe ending in what an intention waits for (`(due Jun 2027; raise it now)`), its full
  note on the indented lines beneath it.
- The app's notes of what changed (the results of its own `memory_notes` calls, between
  `<<MEMORY NOTES ...>>` markers) hold memory lines as they now read, and lines saying
  `key is no longer kept`: each changes what is remembered from where it stands on.
- A line starting `Previous email:` begins an earlier email; the lines under it belong to
  it, up to the next such line, a `#` heading, a memory line or the end of the message.
- Conversation quoted in a user message (a session to summarise) is one message per block,
  `Person:` or `Coach:` on a line of its own and the message beneath; elsewhere one turn
  per line, `User: ...` or `Assistant: ...` (`Coach: ...` also counts as the assistant).
- A line `Name: ...` is the user's name, for greeting them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from datetime import date
from enum import StrEnum
from typing import Any

# As the app sends it: "Today: 2025-03-10 (Monday)", the weekday optional.
TODAY = re.compile(r"^\s*Today:\s*(\d{4}-\d{2}-\d{2})(?:\s*\([A-Za-z]+\))?\s*$", re.MULTILINE)
NAME = re.compile(r"^\s*Name:\s*(.+?)\s*$", re.MULTILINE)
PREVIOUS_EMAIL = re.compile(r"^\s*Previous email:\s*", re.IGNORECASE)
# A memory's line: "- talk (by them, 3 Dec): Giving a talk (due Jun 2027; raise it now)".
INDEX_LINE = re.compile(r"^- ([a-z0-9][a-z0-9-]*) \(([^)]*)\): (.+?)\s*$")
# What requests written by hand may still carry: "[memory note, 3 Dec] You saved key: ...".
OLD_NOTE = re.compile(r"^\s*\[memory note, [^\]]*\]\s*(?:You saved|The person added) ([a-z0-9-]+): (.+?)\s*$")
TRAILER = re.compile(r" \(((?:due|emailed about|raise it now|done|dismissed)[^()]*)\)$")
NOTES_START = "<<MEMORY NOTES "
# The app's own call whose results carry its notes: never a call of the coach's.
NOTES_CALL = "memory_notes"
NOTE_GONE = re.compile(r"\b([a-z0-9-]+) is no longer kept\b")
NOTE_SUGGESTED = re.compile(r"\byou suggested a change to ([a-z0-9-]+)\b", re.IGNORECASE)
MONTH_IN_KEY = re.compile(
    r"-(?:january|february|march|april|may|june|july|august|september|october|november|december)\b"
)
CONVERSATION_LINE = re.compile(
    r"^\s*(?:[-*\u2022]\s*)?\**(user|assistant|coach)\**\s*:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE
)


class Kind(StrEnum):
    """What a request asks the coach for."""

    CHAT = "coach"
    SESSION_SUMMARY = "session summary"
    FOLLOW_UP_EMAIL = "follow-up email"
    WEEKLY_EPISODE = "weekly episode"
    MEMORY_IMPORT = "memory import"


@dataclass(frozen=True)
class Remembered:
    """A memory the app listed in the system prompt."""

    key: str
    summary: str
    tier: str = ""
    category: str = ""
    content: str = ""
    due_at: str | None = None
    # Who wrote it, as the app says it ("the person", "you"); and whether it is due now.
    source: str = ""
    bring_up: bool = False
    # How close a search found it (its "similarity"), where a search said.
    score: float | None = None


@dataclass(frozen=True)
class Line:
    """One turn of a conversation: "user" or "assistant", and what they said."""

    role: str
    text: str


@dataclass(frozen=True)
class CallResult:
    """A tool call the assistant made in the latest round, and the result the app sent back."""

    name: str
    arguments: dict[str, Any]
    result: Any


def text_of(message: dict[str, Any]) -> str:
    """A message's text, whether its content is a string or a list of parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def system_text(messages: list[dict[str, Any]]) -> str:
    """Every system (or developer) message's text, in order."""
    return "\n".join(text_of(message) for message in messages if message.get("role") in {"system", "developer"})


def request_text(messages: list[dict[str, Any]]) -> str:
    """The system and user messages' text: where the app puts what a document is built from."""
    return "\n".join(text_of(message) for message in messages if message.get("role") in {"system", "developer", "user"})


def request_kind(messages: list[dict[str, Any]]) -> Kind:
    """The kind named by the first line of the first system message; a chat turn by default."""
    first = next((message for message in messages if message.get("role") in {"system", "developer"}), None)
    heading = text_of(first).strip().split("\n", 1)[0] if first else ""
    name = heading.lstrip("#").strip().lower() if heading.startswith("#") else ""
    return next((kind for kind in Kind if name.startswith(kind.value)), Kind.CHAT)


def stated_today(messages: list[dict[str, Any]]) -> date | None:
    """The date of a `Today: YYYY-MM-DD` line in the system prompt, if there is a valid one."""
    match = TODAY.search(system_text(messages))
    if not match:
        return None
    try:
        return date.fromisoformat(match.group(1))
    except ValueError:
        return None


def user_name(messages: list[dict[str, Any]]) -> str | None:
    """The name on a `Name: ...` line, if the request has one."""
    match = NAME.search(request_text(messages))
    return match.group(1) if match else None


def remembered(messages: list[dict[str, Any]]) -> list[Remembered]:
    """The memories listed in the system prompt, in order, one per key; each under its
    topic's heading ("## goal"), which names its category. The app's notes later in the
    conversation (a memory as it now reads, one no longer kept) apply in order."""
    found: dict[str, Remembered] = {}
    for message in messages:
        text = text_of(message)
        if message.get("role") in {"system", "developer"}:
            _read_lines(found, text, notes=False)
        elif message.get("role") == "tool" and text.startswith(NOTES_START):
            _read_lines(found, text, notes=True)
    return list(found.values())


def _read_lines(found: dict[str, Remembered], text: str, *, notes: bool) -> None:
    topic, last = "", ""
    # In a system prompt, only what is between the block's markers is memory (a prompt
    # written by hand, with no markers, is read whole).
    inside = notes or "<<MEMORIES " not in text
    for line in text.splitlines():
        if line.startswith(("<<MEMORIES ", "<<END MEMORIES ")):
            inside, topic = line.startswith("<<MEMORIES "), ""
        elif not inside:
            continue
        elif line.startswith(("## ", "# ")):
            topic = line.lstrip("#").split(" (")[0].strip().lower()
        elif (item := _json_object(line)) and isinstance(item.get("key"), str) and isinstance(item.get("summary"), str):
            # A memory quoted whole as JSON, as requests written by hand may still give it.
            found.setdefault(item["key"], as_remembered({"category": topic, **item}))
        elif line.startswith("  ") and last in found:
            earlier = found[last]
            content = f"{earlier.content}\n{line.strip()}" if earlier.content else line.strip()
            found[last] = replace(earlier, content=content)
        elif (memory := _memory_line(line, topic)) is not None:
            if notes or memory.key not in found:
                before = found.get(memory.key)
                category = memory.category or (before.category if before else _category_of_key(memory.key))
                found[memory.key] = replace(memory, category=category)
            last = memory.key
        elif (saved := OLD_NOTE.match(line)) is not None:
            key = saved.group(1)
            found[key] = replace(
                found.get(key) or Remembered(key, "", category=_category_of_key(key)), summary=saved.group(2)
            )
        elif (notes or line.startswith("[memory note")) and (gone := NOTE_GONE.search(line)):
            found.pop(gone.group(1), None)
            last = ""
        else:
            last = ""


def _memory_line(line: str, topic: str) -> Remembered | None:
    match = INDEX_LINE.match(line)
    if not match:
        return None
    marks, summary = match.group(2), match.group(3)
    trailer = TRAILER.search(summary)
    waits = trailer.group(1) if trailer else ""
    summary = summary[: trailer.start()] if trailer else summary
    source = "the person" if "by them" in marks else "support" if "by support" in marks else "you"
    due = re.search(r"due ([^;]+)", waits)
    return Remembered(
        key=match.group(1),
        summary=summary,
        tier="prospective" if waits else "",
        category=topic,
        due_at=due.group(1).strip() if due else None,
        source=source,
        bring_up="raise it now" in waits,
    )


def _category_of_key(key: str) -> str:
    # A note names no category: its key says it the way the app and this coach name
    # memories ("allergy-1" for a safety note, "talk-june" for a dated intention).
    head = key.split("-")[0]
    if head in {"injury", "allergy", "medical", "safety", "constraint", "goal", "schedule", "feedback"}:
        return head
    return "project" if MONTH_IN_KEY.search(key) else "other"


def previous_emails(messages: list[dict[str, Any]]) -> list[str]:
    """The text of each earlier email the request lists, subject and body together."""
    emails: list[list[str]] = []
    for message in messages:
        if message.get("role") not in {"system", "developer", "user"}:
            continue
        in_email = False
        for line in text_of(message).splitlines():
            if PREVIOUS_EMAIL.match(line):
                emails.append([PREVIOUS_EMAIL.sub("", line)])
                in_email = True
            elif line.lstrip().startswith("#") or _json_object(line):
                in_email = False
            elif in_email:
                emails[-1].append(line)
    return ["\n".join(lines).strip() for lines in emails]


# A transcript as the app quotes it for a summary: each message whole under who said it.
SPEAKER_BLOCK = re.compile(r"^(Person|Coach):\n(.+?)(?=\n\n(?:Person|Coach):\n|\Z)", re.MULTILINE | re.DOTALL)


def conversation(messages: list[dict[str, Any]]) -> list[Line]:
    """The conversation a document is about: a transcript of `Person:`/`Coach:` blocks, or
    quoted `User:`/`Assistant:` lines, else the messages."""
    blocks = [
        Line("user" if match.group(1) == "Person" else "assistant", " ".join(match.group(2).split()))
        for message in messages
        if message.get("role") == "user"
        for match in SPEAKER_BLOCK.finditer(text_of(message))
    ]
    if blocks:
        return blocks
    quoted = [
        Line("user" if match.group(1).lower() == "user" else "assistant", match.group(2))
        for match in CONVERSATION_LINE.finditer(request_text(messages))
    ]
    if quoted:
        return quoted
    return [
        Line(message["role"], text_of(message).strip())
        for message in messages
        if message.get("role") in {"user", "assistant"} and text_of(message).strip()
    ]


def earlier_replies(messages: list[dict[str, Any]]) -> list[str]:
    """The coach's replies so far in this conversation, before the person's latest message."""
    last_user = max((index for index, message in enumerate(messages) if message.get("role") == "user"), default=0)
    return [
        text_of(message)
        for message in messages[:last_user]
        if message.get("role") == "assistant" and text_of(message).strip()
    ]


def callable_tools(body: dict[str, Any]) -> frozenset[str]:
    """The function names the model may call, after `tool_choice` ("none", or one named function)."""
    names = {
        tool["function"]["name"]
        for tool in body.get("tools") or []
        if isinstance(tool, dict) and tool.get("type") == "function" and isinstance(tool.get("function"), dict)
    }
    choice = body.get("tool_choice")
    if choice == "none":
        return frozenset()
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        return frozenset(names & {choice["function"].get("name")})
    return frozenset(names)


def latest_round(messages: list[dict[str, Any]]) -> list[CallResult]:
    """The calls of the last assistant message with tool calls, each with its result, if it ends the request."""
    results: dict[str, Any] = {}
    for message in reversed(messages):
        if message.get("role") == "tool":
            results[message.get("tool_call_id", "")] = _parsed(text_of(message))
        elif message.get("role") == "assistant" and message.get("tool_calls"):
            if any(call.get("function", {}).get("name") == NOTES_CALL for call in message["tool_calls"]):
                # The app's notes after the person's message: the coach has not answered yet.
                return []
            return [
                CallResult(
                    call.get("function", {}).get("name", ""),
                    _json_arguments(call.get("function", {}).get("arguments")),
                    results.get(call.get("id", "")),
                )
                for call in message["tool_calls"]
            ]
        else:
            break
    return []


def calls_since_user(messages: list[dict[str, Any]]) -> list[CallResult]:
    """Every call the assistant made after the person's latest message, with its result, in order."""
    last_user = max((i for i, message in enumerate(messages) if message.get("role") == "user"), default=-1)
    results = {
        message.get("tool_call_id", ""): _parsed(text_of(message))
        for message in messages[last_user + 1 :]
        if message.get("role") == "tool"
    }
    return [
        CallResult(
            call.get("function", {}).get("name", ""),
            _json_arguments(call.get("function", {}).get("arguments")),
            results.get(call.get("id", "")),
        )
        for message in messages[last_user + 1 :]
        if message.get("role") == "assistant"
        for call in message.get("tool_calls") or []
        if call.get("function", {}).get("name") != NOTES_CALL
    ]


def suggested(messages: list[dict[str, Any]]) -> frozenset[str]:
    """The keys of memories the coach suggested a change to in this conversation, which
    stand as they were until the person confirms: the old fact is not said again meanwhile."""
    notes = "\n".join(
        text_of(message)
        for message in messages
        if message.get("role") in {"system", "developer"}
        or (message.get("role") == "tool" and text_of(message).startswith(NOTES_START))
    )
    return frozenset(found.group(1) for found in NOTE_SUGGESTED.finditer(notes))


def as_remembered(item: dict[str, Any]) -> Remembered:
    """A memory from a JSON object (a prompt line, or a tool call's arguments); missing fields empty."""

    def field(name: str) -> str:
        value = item.get(name)
        return value if isinstance(value, str) else ""

    return Remembered(
        key=field("key"),
        summary=field("summary"),
        tier=field("tier"),
        category=field("category"),
        content=field("content"),
        due_at=field("due_at") or None,
        source=field("source"),
        bring_up=item.get("bring_up") == "now",
        score=float(score) if isinstance(score := item.get("similarity"), int | float) else None,
    )


def _json_object(line: str) -> dict[str, Any] | None:
    line = line.strip().removeprefix("- ").strip()
    if not (line.startswith("{") and line.endswith("}")):
        return None
    parsed = _parsed(line)
    return parsed if isinstance(parsed, dict) else None


def _json_arguments(arguments: Any) -> dict[str, Any]:
    parsed = _parsed(arguments) if isinstance(arguments, str) else arguments
    return parsed if isinstance(parsed, dict) else {}


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text
