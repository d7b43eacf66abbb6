"""Corrections the person makes to what the coach remembers, as memory tool calls.

"I no longer work nights", "I've stopped running", "actually it's in July", "now I train
at lunch", "I changed my goal to a 10k": each names a memory by meaning, and either ends it
(`delete_memory`) or says what it is now (`update_memory`). The memory is the closest in
meaning to the sentence that shares a word with it, so "my talk is in July now" finds the
talk, not the allergy. The app turns a call on a protected memory into a suggestion the
person confirms; the reason goes with it, and is shown to them, so it is their own words.
"""

from __future__ import annotations

import calendar
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import date
from typing import Any

from offline_coach.bag_of_words import words
from offline_coach.dates import find_due_date
from offline_coach.phrasing import (
    as_sentence,
    capitalise,
    clip,
    normalise,
    sentences,
    summarise_clause,
    third_person,
)
from offline_coach.prompt import CallResult, Remembered
from offline_coach.relevance import closest, text_of_item
from offline_coach.reply import ToolCall

UPDATE = "update_memory"
DELETE = "delete_memory"
# "Actually" and "now" only where they introduce a changed fact: "actually, I'd love help
# with pacing" corrects nothing, and neither does "I'm now training three times a week".
CUE = re.compile(
    r"\b(?:no longer|not any ?more|any ?more|i(?:'ve| have)? stopped|i(?:'ve| have)? changed my|now i\b"
    r"|actually,? (?:it's|it is|my [\w ]+? (?:is|are)|the [\w ]+? (?:is|are))|my [\w ]+? (?:is|are) now)\b",
    re.IGNORECASE,
)
# What ends a memory, rather than changing it: "I've stopped", "no longer", "not any more".
ENDS = re.compile(r"\b(?:no longer|not any ?more|any ?more|i(?:'ve| have)? stopped)\b", re.IGNORECASE)
# Where the new fact starts: "..., now I work days", "I changed my goal to a 10k".
NEW_FACT = re.compile(r"\b(?:now (?=i\b)|changed my \w+ to |(?:it's|it is) now |actually,? )", re.IGNORECASE)
CHANGED_TO = re.compile(r"\bchanged my (\w+) to (.+)$", re.IGNORECASE)
MONTHS = "|".join(calendar.month_name[1:])
# The month it no longer is: "in July now, not June" names June only to say it is wrong.
NOT_MONTH = re.compile(rf",?\s*\b(?:not|instead of|rather than)\s+(?:in\s+|on\s+)?(?:{MONTHS})\b", re.IGNORECASE)
MONTH_WORD = re.compile(rf"\b(?:{MONTHS})\b", re.IGNORECASE)
# A correction names its memory by meaning, but looser than a reply picks what to bring up:
# "my talk is in July now" and "Giving a talk in June" are the same memory, changed.
MATCH_FLOOR = 0.3
REASON_CHARS = 300
# The reason is shown to the person (history, suggestions): their words, not the coach's.
REASON_PREFIX = "You told me: "


@dataclass(frozen=True)
class Changed:
    """A change the latest round made to a memory: "updated", "deleted" or "proposed"."""

    action: str
    item: Remembered


@dataclass(frozen=True)
class Corrections:
    """The calls a message's corrections make, and the sentences they came from."""

    calls: tuple[ToolCall, ...] = ()
    sentences: tuple[str, ...] = ()

    def rest(self, text: str) -> str:
        """`text` without the sentences that were corrections: nothing else to note in them."""
        # As `sentences` spelled them: straight apostrophes, single spaces.
        text = normalise(text)
        for sentence in self.sentences:
            text = text.replace(sentence, " ")
        return text


def corrections_in(text: str, known: Sequence[Remembered], *, today: date, tools: frozenset[str]) -> Corrections:
    """An update or a delete for each sentence that corrects a remembered item; none
    unless both tools are offered (a correction may need either)."""
    if not {UPDATE, DELETE} <= tools:
        return Corrections()
    calls: list[ToolCall] = []
    found: list[str] = []
    taken: set[str] = set()
    for sentence in sentences(text):
        if sentence.endswith("?") or not CUE.search(sentence):
            continue
        candidates = [item for item in known if item.key not in taken and _shares_a_word(sentence, item)]
        target = closest(sentence, candidates, floor=MATCH_FLOOR)
        if target is None:
            continue
        taken.add(target.key)
        found.append(sentence)
        calls.append(_call(sentence, target, today))
    return Corrections(tuple(calls), tuple(found))


def is_correction(call: CallResult) -> bool:
    """Whether a call of the latest round was one of these corrections."""
    return call.name in {UPDATE, DELETE} and str(call.arguments.get("reason", "")).startswith(REASON_PREFIX)


def _call(sentence: str, target: Remembered, today: date) -> ToolCall:
    reason = f"{REASON_PREFIX}\u201c{sentence}\u201d"[:REASON_CHARS]
    if ENDS.search(sentence) and not NEW_FACT.search(sentence):
        return ToolCall(DELETE, json.dumps({"key": target.key, "reason": reason}))
    return ToolCall(UPDATE, json.dumps({"key": target.key, **_changed(sentence, target, today), "reason": reason}))


def _changed(sentence: str, target: Remembered, today: date) -> dict[str, Any]:
    """The update's fields: a new date swapped into the summary, or the new fact as said."""
    unchanged: dict[str, Any] = dict.fromkeys(("tier", "category", "status", "clear"))
    said = NOT_MONTH.sub("", sentence)
    due = find_due_date(said, today)
    if due is not None and MONTH_WORD.search(target.summary):
        month = calendar.month_name[due.day.month]
        summary = MONTH_WORD.sub(month, target.summary)
        content = f"{as_sentence(third_person(said))}\nDue: {due.label}."
        return {**unchanged, "summary": clip(summary), "content": content, "due_at": due.due_at}
    if changed_to := CHANGED_TO.search(said):
        # "I changed my goal to a 10k": the new goal, named as the old one was.
        summary = clip(f"{capitalise(changed_to.group(1))}: {changed_to.group(2).rstrip(' .!')}")
        return {**unchanged, "summary": summary, "content": as_sentence(third_person(said)), "due_at": None}
    new_fact = NEW_FACT.search(said)
    clause = said[new_fact.end() :] if new_fact else said
    summary = clip(summarise_clause(clause))
    return {**unchanged, "summary": summary, "content": as_sentence(third_person(said)), "due_at": None}


def _shares_a_word(sentence: str, item: Remembered) -> bool:
    # Meaning alone would match "I no longer eat meat" to any food note; a shared word
    # (stemmed: "running" and "run") keeps a correction on the memory it names.
    return bool(set(words(sentence)) & set(words(f"{text_of_item(item)} {item.key.replace('-', ' ')}")))


def changes_made(latest: Sequence[CallResult], known: Sequence[Remembered]) -> list[Changed]:
    """The corrections of the latest round, as the app answered them: updated, deleted, or
    put to the person as a suggestion (a protected memory stays as it stands)."""
    by_key = {item.key: item for item in known}
    changes = []
    for call in latest:
        status = call.result.get("status") if isinstance(call.result, dict) else None
        earlier = by_key.get(str(call.arguments.get("key")))
        if not is_correction(call) or earlier is None or status not in {"updated", "deleted", "proposed"}:
            continue
        summary = call.arguments.get("summary")
        now = replace(earlier, summary=summary) if status == "updated" and isinstance(summary, str) else earlier
        changes.append(Changed(str(status), now))
    return changes
