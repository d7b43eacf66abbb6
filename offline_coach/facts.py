"""A memory import: another assistant's answer, pasted by the person, split into facts.

The offline coach answers as a model asked for JSON would: `{"facts": [...]}`, each fact
with a summary, details, a category and a tier. The facts are the ones the app's own
split finds (`paste_splitter`, the one package of the app's this server may import), so
the offline coach and the app's fallback never disagree on what the facts are. Where it
stands in for a model, it reads each fact with what the coach knows besides: a date still
to come makes an intention, and what it would note of the fact decides a category the
heading leaves open (never a safety one the fact's words do not name).
"""

from __future__ import annotations

import json
from datetime import date
from typing import Any

from offline_coach.phrasing import SUMMARY_MAX_CHARS, swap_person
from offline_coach.prompt import text_of
from offline_coach.statements import notes_in
from paste_splitter import PastedFact, safety_category, split_paste
from paste_splitter.categories import SAFETY_CATEGORIES, guess_category

# The person, as the pasted answer addresses them, in the words the coach's recognisers read.
FIRST_PERSON = {
    "you're": "I'm",
    "you've": "I've",
    "you'd": "I'd",
    "you'll": "I'll",
    "you are": "I am",
    "you": "I",
    "your": "my",
    "yours": "mine",
    "yourself": "myself",
}


def pasted_facts(messages: list[dict[str, Any]], *, today: date) -> str:
    """The facts in the last user message, as the JSON the app asks for."""
    pasted = next((text_of(m) for m in reversed(messages) if m.get("role") == "user"), "")
    facts = split_paste(pasted, summary_max_chars=SUMMARY_MAX_CHARS).facts
    return json.dumps({"facts": [_as_json(fact, today) for fact in facts]})


def _as_json(fact: PastedFact, today: date) -> dict[str, str]:
    category, tier = _category_and_tier(fact, today)
    return {"summary": fact.summary, "details": fact.details, "category": category, "tier": tier}


def _category_and_tier(fact: PastedFact, today: date) -> tuple[str, str]:
    """The category: the splitter's, which is safety first and only on safety words (the
    fact's own or its heading's), then the heading; else what the coach would note of it,
    never a safety category its words do not name. The tier: prospective when the fact has
    a date still to come, else the splitter's."""
    text = f"{fact.summary} {fact.details}"
    said = swap_person(text, FIRST_PERSON)
    notes = notes_in(said, today=today)
    # Something still to come is an intention when it has a date ("in April"); the import
    # carries no date, but the tier says the coach should bring it up.
    tier = "prospective" if any(note.due_at for note in notes) else fact.tier
    if safety_category(text) or fact.heading.category:
        return fact.category, tier
    noted = next((note.category for note in notes if note.category not in SAFETY_CATEGORIES), None)
    return guess_category(text, heading=fact.heading, suggested=noted), tier
