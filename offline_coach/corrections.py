"""Corrections the person makes to what the coach remembers, found the way a model finds
them: what a sentence is about comes from the app's own search (`search_memories`), and the
sentence says it changed ("the trip moved to June", "no longer a pharmacist", "I stopped
bouldering", "it's June now, not May").

A sentence corrects the memory the search ranked first among those it shares a word with
(or that the search found close in meaning), when it says a change: a word of change
("moved", "quit", "cancelled", "no longer", "these days"), or another month, weekday or
time than the memory's. What it says ends ("I left the bakery") is dropped; what is left
is the fact as it now stands, and the memory is updated to it: its month or weekday
swapped in place where the memory names one, else the new words, said to the person. With
nothing left, the memory is deleted. The app turns a call on a protected memory into a
suggestion the person confirms; the reason goes with it, and is shown to them, so it is
their own words.
"""

from __future__ import annotations

import calendar
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date
from typing import Any

from offline_coach.bag_of_words import words
from offline_coach.dates import find_due_date
from offline_coach.phrasing import capitalise, clip, normalise, sentences, swap_person
from offline_coach.prompt import CallResult, Remembered
from offline_coach.reply import ToolCall
from offline_coach.wording import SECOND_PERSON

UPDATE = "update_memory"
DELETE = "delete_memory"
SAFETY_CATEGORIES = frozenset({"injury", "allergy", "constraint", "safety", "medical"})
# What says the old fact is over.
ENDS = re.compile(
    r"\b(?:no longer|not any ?more|any ?more|no more|stopped|quit|quitting|(?:i|we)(?:'ve| have)? left|leaving"
    r"|handed in|resigned|cancel+ed|cancel+ing|called off|(?:is|'s) off|(?:isn't|is not|aren't|won't be) happening"
    r"|(?:is|are|'s|'re) (?:over|done)|(?:i'm|i am) done|behind me|gave up|given up|giving up|dropped|after all"
    r"|used to|not (?:true|right|correct))\b|^forget\b|\bforget about\b",
    re.IGNORECASE,
)
# What a clause says is not so: dropped from what the memory now reads.
NOT_SO = re.compile(r"\b(?:not|don't|do not|doesn't|does not|isn't|is not|aren't|are not|never)\b", re.IGNORECASE)
# What says it changed, and the quieter words that do only beside a changed detail.
CHANGES = re.compile(
    r"\b(?:moved|changed|switched|swapped|postponed|pushed back|brought forward|resched\w+|instead|rather than"
    r"|new job|took (?:an?|the) \w+ job|got (?:an?|the) job|started at|since this)\b",
    re.IGNORECASE,
)
ADDS = re.compile(r"\b(?:also|another|too|as well|second|besides)\b", re.IGNORECASE)
QUIET = re.compile(r"\b(?:now|these days|nowadays|actually|at the moment)\b", re.IGNORECASE)
# The same words closing what a memory now reads, where they say only that it changed.
STANDS_NOW = re.compile(r"\s*,?\s*\b(?:now|these days|nowadays|at the moment)\s*$", re.IGNORECASE)
# Where a sentence's clauses part: a dash, a colon or semicolon, a comma, or "and"/"but"/"so".
CLAUSE_BREAK = re.compile(r"(\s+[\u2014\u2013-]+\s+|[;:]\s+|,\s+(?:and |but |so )?|\s+(?:and|but|so)\s+)")
LEAD_IN = re.compile(
    r"^(?:(?:a |quick |small |an? )?update(?: on [\w ]+?)?|just so you know|fyi|heads up|btw|by the way|actually"
    r"|so|well|oh|ok(?:ay)?|hey)\b[,:!.]?\s*",
    re.IGNORECASE,
)
# "instead of the bakery", "not May": what a sentence names only to say it is no longer so.
NOT_THAT = re.compile(r",?\s*\b(?:instead of|rather than|not)\s+(?:the |a |an |my |in |on )?[\w']+", re.IGNORECASE)
MONTHS = [name for name in calendar.month_name if name]
WEEKDAYS = [name for name in calendar.day_name]
MONTH = re.compile(rf"\b(?:{'|'.join(MONTHS)})\b", re.IGNORECASE)
WEEKDAY = re.compile(rf"\b(?:{'|'.join(WEEKDAYS)})s?\b", re.IGNORECASE)
# Weekdays said together: "Tuesday and Thursday", "Mondays, Wednesdays and Fridays".
WEEKDAY_GROUP = re.compile(rf"{WEEKDAY.pattern}(?:(?:,\s*|\s+(?:and|or|&)\s+){WEEKDAY.pattern})*", re.IGNORECASE)
TIME = re.compile(r"\b\d{1,2}(?::\d{2})?\s?(?:am|pm)\b", re.IGNORECASE)
SLOTS = (MONTH, WEEKDAY, TIME)
# A search's similarity from which a memory is what a sentence is about, shared word or not
# (all-MiniLM-L6-v2's scale; a search that gives none leaves the shared words to decide).
CLOSE_IN_MEANING = 0.5
SHORTEST_PREFIX = 5
# Words of a change, not of what changed: "no more 4am starts" names the 4am, not the "no".
NOT_NAMES = frozenset({"no", "not", "now", "more", "any", "anymore", "longer", "day", "days", "time", "week"})
REASON_CHARS = 300
# The reason is shown to the person (history, suggestions): their words, not the coach's.
REASON_PREFIX = "You told me: "
STARTS_WITH_VERB = re.compile(r"^(?:\w+ed|started|took|got|moved|drive|work|teach|run|train)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Changed:
    """A change the turn made to a memory: "updated", "deleted" or "proposed"."""

    action: str
    item: Remembered


@dataclass(frozen=True)
class Corrections:
    """The calls a message's corrections make, and the sentences they came from."""

    calls: tuple[ToolCall, ...] = ()
    sentences: tuple[str, ...] = ()

    def rest(self, text: str) -> str:
        """`text` without the sentences that were corrections: nothing else to note in them."""
        text = normalise(text)
        for sentence in self.sentences:
            text = text.replace(sentence, " ")
        return text


def corrections_in(
    text: str, found: Mapping[str, Sequence[Remembered]], *, today: date, tools: frozenset[str]
) -> Corrections:
    """An update or a delete for each memory the message's sentences correct. `found` is
    what the search found for each sentence (by the sentence, as searched); none unless
    both tools are offered (a correction may need either)."""
    if not {UPDATE, DELETE} <= tools:
        return Corrections()
    said = [sentence for sentence in sentences(text) if not sentence.endswith("?")]
    targets: dict[str, tuple[Remembered, list[str]]] = {}
    for sentence in said:
        target = _corrected(sentence, found.get(sentence, ()))
        if target is not None:
            targets.setdefault(target.key, (target, []))[1].append(sentence)
    calls, used = [], []
    for target, told in targets.values():
        following = _following(said, told, taken={s for _, ss in targets.values() for s in ss})
        others = [item for sentence in told for item in found.get(sentence, ()) if item.key != target.key]
        used += [*told, *following]
        calls.append(_call(target, told, following, today, others=others))
    return Corrections(tuple(calls), tuple(used))


def _corrected(sentence: str, found: Sequence[Remembered]) -> Remembered | None:
    """The memory `sentence` corrects, if it corrects one."""
    about = next((item for item in found if shares_a_word(sentence, item) or _close(item)), None)
    if about is None:
        return None
    if ADDS.search(sentence):
        # "I'm also giving a talk in March": another fact beside it, not a change to it.
        return None
    if ENDS.search(sentence) or CHANGES.search(sentence):
        return about
    # "now", "actually", "these days": a change only beside a detail that changed ("it's
    # June now"); "I'm now training three times a week" adds to the plan, and "I'm allergic
    # to kiwi now" is a new allergy.
    if QUIET.search(sentence) and any(_slot_differs(slot, sentence, about) for slot in SLOTS):
        return about
    return None


def _following(said: list[str], told: list[str], *, taken: set[str]) -> list[str]:
    """The sentence after a correction that leaves nothing standing, when it says what
    took its place ("I quit the bakery. Started at a bank on Monday.")."""
    if any(_standing(sentence) for sentence in told):
        return []
    after = said.index(told[-1]) + 1
    if after < len(said) and said[after] not in taken and not ENDS.search(said[after]):
        return [said[after]]
    return []


def _call(
    target: Remembered, told: list[str], following: list[str], today: date, *, others: Sequence[Remembered]
) -> ToolCall:
    reason = f"{REASON_PREFIX}\u201c{' '.join([*told, *following])}\u201d"[:REASON_CHARS]
    # "I've dropped the contest, the novel comes first": what is said of another memory
    # is not what this one now reads.
    standing = [
        part
        for sentence in told
        for part in _standing(sentence)
        if not any(shares_a_word(part, other) and not shares_a_word(part, target) for other in others)
    ] + following
    swapped = _swapped(target, told, today)
    if swapped is None and not standing:
        return ToolCall(DELETE, json.dumps({"key": target.key, "reason": reason}))
    if swapped is None:
        # The fact as it stands: "now" said it changed, and the memory's line needs no date.
        summary = clip(to_the_person(STANDS_NOW.sub("", ", ".join(part.rstrip(" .!") for part in standing))))
        swapped = {"summary": summary, "content": f"{summary}.", "due_at": None}
    unchanged: dict[str, Any] = dict.fromkeys(("tier", "category", "status", "clear"))
    return ToolCall(UPDATE, json.dumps({"key": target.key, **swapped, **unchanged, "reason": reason}))


def _standing(sentence: str) -> list[str]:
    """The clauses of `sentence` that say what is so now, without those that end the old."""
    sentence = NOT_THAT.sub("", LEAD_IN.sub("", sentence.strip()))
    parts = CLAUSE_BREAK.split(sentence)
    kept = [part.strip() for part in parts[::2] if part.strip() and not (ENDS.search(part) or NOT_SO.search(part))]
    return [part for part in kept if words(part)]


def _swapped(target: Remembered, told: list[str], today: date) -> dict[str, Any] | None:
    """The memory with a month, weekdays or a time the sentences name swapped in for its own."""
    said = NOT_THAT.sub("", " ".join(told))
    summary = target.summary
    for slot in (MONTH, WEEKDAY_GROUP, TIME):
        new = slot.search(said)
        if new and slot.search(summary) and new.group(0).lower() != slot.search(summary).group(0).lower():  # type: ignore[union-attr]
            summary = slot.sub(lambda _: new.group(0), summary, count=1)  # noqa: B023 - used at once
    if summary == target.summary:
        return None
    fields: dict[str, Any] = {"summary": clip(summary), "content": f"{capitalise(summary)}.", "due_at": None}
    if (month := MONTH.search(said)) and (target.due_at or target.tier == "prospective"):
        due = find_due_date(f"in {month.group(0)}", today)
        fields["due_at"] = due.due_at if due else None
    return fields


def _slot_differs(slot: re.Pattern[str], sentence: str, item: Remembered) -> bool:
    said = {match.lower().rstrip("s") for match in slot.findall(NOT_THAT.sub("", sentence))}
    kept = {match.lower().rstrip("s") for match in slot.findall(item.summary)}
    return bool(said and kept and said != kept)


def to_the_person(text: str) -> str:
    """A clause the person said of themselves, said back to them as a memory's one line."""
    text = swap_person(text, SECOND_PERSON)
    if STARTS_WITH_VERB.match(text) and not text.lower().startswith("you"):
        text = f"you {text[:1].lower()}{text[1:]}"
    return capitalise(text)


def _close(item: Remembered) -> bool:
    return item.score is not None and item.score >= CLOSE_IN_MEANING


def shares_a_word(sentence: str, item: Remembered) -> bool:
    """Whether `sentence` names something of `item` by a word (stemmed, or one word all but
    the start of the other: "baker" and "bakery", "rehearse" and "rehearsals"). It keeps a
    correction on the memory it names: meaning alone would match any two food notes."""
    mine = set(words(sentence)) - NOT_NAMES
    theirs = set(words(f"{item.summary} {item.content} {item.key.replace('-', ' ')}")) - NOT_NAMES
    return any(_alike(one, other) for one in mine for other in theirs)


def _alike(one: str, other: str) -> bool:
    if one == other:
        return True
    short = min(len(one), len(other))
    shared = next((i for i, (a, b) in enumerate(zip(one, other, strict=False)) if a != b), short)
    return shared >= SHORTEST_PREFIX and shared >= short - 1


def is_correction(call: CallResult) -> bool:
    """Whether a call of the turn was one of these corrections."""
    return call.name in {UPDATE, DELETE} and str(call.arguments.get("reason", "")).startswith(REASON_PREFIX)


def changes_made(calls: Sequence[CallResult], known: Sequence[Remembered]) -> list[Changed]:
    """The corrections of the turn, as the app answered them: updated, deleted, or put to
    the person as a suggestion (a protected memory stays as it stands)."""
    by_key = {item.key: item for item in known}
    changes = []
    for call in calls:
        status = call.result.get("status") if isinstance(call.result, dict) else None
        key = str(call.arguments.get("key"))
        if not is_correction(call) or status not in {"updated", "deleted", "proposed"}:
            continue
        earlier = by_key.get(key) or Remembered(key=key, summary="")
        summary, content = call.arguments.get("summary"), call.arguments.get("content")
        if status == "updated" and isinstance(summary, str):
            # The note as it now reads: never the old note under the new line.
            now = replace(earlier, summary=summary, content=content if isinstance(content, str) else "")
        else:
            now = earlier
        changes.append(Changed(str(status), now))
    return changes
