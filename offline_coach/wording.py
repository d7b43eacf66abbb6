"""Memory text reworded into a reply: addressed to the person, one clause, no full stop of
its own; or, when it cannot be reworded safely, quoted as a note of what they said.

A memory's text comes from anywhere: this coach's third-person summaries ("Works night
shifts"), what the person typed at onboarding ("Allergic to peanuts. I had a stress
fracture in my right shin in 2023."), another assistant's export. Pasted into a sentence as
it stands, it reads "your you had a stress fracture ... in 2023., so": so each shape is
reworded by a rule that knows it, the result is checked, and anything else is quoted.
"""

from __future__ import annotations

import re

from offline_coach.bag_of_words import words
from offline_coach.phrasing import (
    addressed_to_reader,
    lower_first,
    normalise,
    second_person_words,
    sentences,
    swap_person,
)
from offline_coach.prompt import Remembered
from paste_splitter import domains_of

# First person -> second: what the person wrote about themselves, said back to them.
SECOND_PERSON = {
    "i'm": "you're",
    "i am": "you are",
    "i've": "you've",
    "i'd": "you'd",
    "i'll": "you'll",
    "i was": "you were",
    "i": "you",
    "me": "you",
    "my": "your",
    "mine": "yours",
    "myself": "yourself",
    "we": "you",
    "our": "your",
}
# A condition a summary may open with: "Allergic to peanuts" -> "you're allergic to peanuts".
STATE = re.compile(
    r"^(?:allergic|intolerant|vegan|vegetarian|diabetic|asthmatic|pregnant|coeliac|celiac|lactose intolerant"
    r"|recovering|injured|training|working|studying|learning|preparing|giving|writing|running|busy|new to)\b",
    re.IGNORECASE,
)
# A part of the body with what is wrong with it: "Bad left knee" -> "you have a bad left knee".
CONDITION = re.compile(
    r"^(?:bad|sore|weak|injured|painful|torn|sprained|broken|strained|pulled|dodgy|stiff|damaged|fractured)"
    r"(?: (?:left|right|lower|upper))? [a-z]+$",
    re.IGNORECASE,
)
LIMIT = re.compile(r"^(?:no|avoid|avoiding|nothing with)\s+([a-z][a-z ,'-]*)$", re.IGNORECASE)
FIRST_PERSON_START = re.compile(r"^(?:i|i'm|i've|i'd|i'll|i am|i was|my)\b", re.IGNORECASE)
# Already about "you", or about "they" as this coach writes its notes.
ADDRESSED_START = re.compile(r"^(?:you|you're|you've|your|they|they're|they've|their)\b", re.IGNORECASE)
# What a sentence must not show once memory text is in it.
PASTED = re.compile(
    r"(?i:\b(?:your|my|their) (?:your|you|my|i|their)\b|\byou (?:you|your)\b|\bthey\b|\bthem\b|\btheir\b)"
    r"|\.\s*,|\.\s+[a-z]|[.!?]$|[\"“”{}\[\]]|^\s*$"
)
MAX_CLAUSE_CHARS = 140


def clause(item: Remembered, *, about: str = "") -> str | None:
    """The item as a clause addressed to the person ("you're allergic to peanuts"), without a
    capital or a full stop, to go inside a sentence; None when no rule rewords it safely.
    With `about` (a message), the sentence of the note that concerns it is the one used."""
    # The note itself last: "They had their hip replaced" where the summary is in no shape a rule knows.
    for text in [*_candidates(item, about), *sentences(item.content)[:1]]:
        reworded = _reworded(text)
        if reworded and len(reworded) <= MAX_CLAUSE_CHARS and not PASTED.search(reworded):
            return reworded
    return None


def each_clause(item: Remembered) -> list[str] | None:
    """Every sentence of the item's summary as a clause, or None if one cannot be reworded."""
    reworded = [_reworded(normalise(part)) for part in sentences(item.summary)]
    if not reworded or any(not part or PASTED.search(part) for part in reworded):
        return None
    return [part for part in reworded if part]


def used_in(item: Remembered, reply: str) -> bool:
    """Whether a reply already brought the item up: most of its summary's content words are in it."""
    wanted = set(words(item.summary))
    return bool(wanted) and len(wanted & set(words(reply))) * 2 > len(wanted)


def _candidates(item: Remembered, about: str) -> list[str]:
    """The item's summary, then its note's sentences; the sentence on `about`'s topic first."""
    parts = [normalise(part) for part in sentences(item.summary)]
    if len(parts) > 1 and about:
        # Only the part the message is about: the shin, not the peanuts, for a training plan.
        touched = domains_of(about)
        parts.sort(key=lambda part: not (domains_of(part) & touched))
    return parts or [normalise(item.summary)]


def _reworded(text: str) -> str | None:
    text = text.strip().rstrip(" .;:,")
    condition, colon, limit = text.partition(":")
    if colon and (what := LIMIT.match(limit.strip())) and (reworded := _reworded(condition)):
        # "Bad left shoulder: no overhead pressing", as this coach notes an injury's limit.
        return f"{reworded}, which rules out {what.group(1)}"
    if FIRST_PERSON_START.match(text):
        return lower_first(swap_person(text, SECOND_PERSON))
    if ADDRESSED_START.match(text):
        return lower_first(second_person_words(text))
    if reader := addressed_to_reader(text):
        return reader
    if alone := LIMIT.match(text):
        # "No downhill running", a limit noted alone.
        return f"{alone.group(1).lower()} is out"
    if STATE.match(text):
        return f"you're {lower_first(text)}"
    if CONDITION.match(text):
        return f"you have a {text.lower()}"
    return None
