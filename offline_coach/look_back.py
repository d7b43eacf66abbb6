"""Looking back: when the person asks about something said in an earlier conversation ("do
you remember when...", "what did I say about...", "like I said..."), the coach calls
`search_conversations`, then answers from what it found, quoting the person's own words.

It reads the look-back's result as the app writes it: JSON with `status`, `exchanges` (how
many were found) and `text`, where each exchange is a heading line
`--- Conversation "<title>" of <YYYY-MM-DD> (<weekday>)` (with `, said on <YYYY-MM-DD>
(<weekday>)` when it was said on a later day), then one line per speaker:
`The person: ...`, `You (the coach): ...`, or `Your summary of that conversation: ...`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import date

from offline_coach.prompt import CallResult
from offline_coach.reply import ToolCall

SEARCH = "search_conversations"
# What asks about an earlier conversation, and what follows it is what to look for.
ASKS_BACK = re.compile(
    r"\b(?:do|can|did) you (?:still )?remember(?: (?:when|what|how|that|the time|where))?\s*(?P<about>[^?.!]*)"
    r"|\bwhat (?:did|was it) i (?:say|said|tell you|told you|mention|mentioned)(?: (?:about|regarding|on))?"
    r"\s*(?P<said>[^?.!]*)"
    r"|\b(?:like|as) i (?:said|told you|mentioned)(?: (?:before|earlier|last \w+))?,?\s*(?P<again>[^?.!]*)",
    re.IGNORECASE,
)
LEADING = re.compile(r"^(?:i (?:said|told you|mentioned)(?: that)?|that|about|when|me)\s+", re.IGNORECASE)
HEADING = re.compile(
    r'^--- Conversation "(?P<title>.*)" of (?P<began>\d{4}-\d{2}-\d{2}) \(\w+\)'
    r"(?:, said on (?P<said>\d{4}-\d{2}-\d{2}) \(\w+\))?$"
)
PERSON = "The person: "
SUMMARY = "Your summary of that conversation: "
QUERY_MAX_CHARS = 300


@dataclass(frozen=True)
class Found:
    """One exchange of the result: when, and what the person (or the summary) said."""

    said_on: date
    person: str
    summary: str


def look_back_call(text: str) -> ToolCall | None:
    """A `search_conversations` call for a message that asks about an earlier conversation."""
    match = ASKS_BACK.search(text)
    if match is None:
        return None
    about = next((group for group in match.groups() if group), "") or text
    for _ in range(2):
        about = LEADING.sub("", about.strip())
    query = " ".join(about.split()).strip(" ,;:") or " ".join(text.split())
    return ToolCall(SEARCH, json.dumps({"query": query[:QUERY_MAX_CHARS], "limit": None}))


def looked_back(latest: list[CallResult]) -> list[Found] | None:
    """What the latest round's look-back found (nearest first), or None if it made none, or
    the app refused it (memory off, an error)."""
    for call in latest:
        if call.name != SEARCH or not isinstance(call.result, dict) or call.result.get("status") != "found":
            continue
        return found_in(str(call.result.get("text") or ""))
    return None


def found_in(text: str) -> list[Found]:
    found: list[Found] = []
    said_on: date | None = None
    for line in text.splitlines():
        if heading := HEADING.match(line):
            said_on = date.fromisoformat(heading.group("said") or heading.group("began"))
        elif said_on is not None and line.startswith(PERSON):
            found.append(Found(said_on=said_on, person=line.removeprefix(PERSON), summary=""))
        elif said_on is not None and line.startswith(SUMMARY):
            found.append(Found(said_on=said_on, person="", summary=line.removeprefix(SUMMARY)))
    return found


def answer_from(found: list[Found]) -> str:
    """The coach's words, from what it found: the nearest of the person's own words, dated."""
    if not found:
        return (
            "I don't have that from our earlier conversations, I'm afraid. "
            "Could you tell me again? I'd like to get it right."
        )
    first = found[0]
    when = f"{first.said_on.day} {first.said_on:%B}"
    if first.person:
        return f'On {when} you told me: "{_quoted(first.person)}" Is that the one you mean? How is it now?'
    return f"When we talked on {when}: {_quoted(first.summary)} Is that the one you mean? How is it now?"


def _quoted(words: str, most: int = 300) -> str:
    words = words.strip()
    return words if len(words) <= most else words[: most - 1].rsplit(" ", 1)[0] + "…"
