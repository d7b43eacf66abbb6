"""A memory import: another assistant's answer, pasted by the person, split into facts.

The offline coach answers as a model asked for JSON would: `{"facts": [...]}`, each fact
with a summary, details, a category and a tier. It splits the way such answers are
written: one fact per bullet, numbered item or line, a line of several sentences one per
sentence; lines indented under a bullet are that fact's details; a heading ("## Health",
"**Goals**", "Work:") hints at the category of what follows it; the assistant's own
remarks ("Here's what I know about you:", "Let me know...", a question) are no facts.
The category comes from what the coach would note of the fact (an injury, an allergy, a
schedule, a goal...), else from its heading, else from a few telling words.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from offline_coach.phrasing import clip, swap_person
from offline_coach.prompt import text_of
from offline_coach.safety import allergy, injury, intolerance
from offline_coach.statements import notes_in

BULLET = re.compile(
    r"^(?P<indent>[ \t]*)(?:[-*+\u2022\u25cf\u25e6\u2013\u2014]|\(?\d{1,3}[.)]|\(?[a-z][.)])\s+(?P<text>\S.*)$"
)
MARKDOWN_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(?P<text>.+?)\s*#*\s*$")
EMPHASIS_HEADING = re.compile(r"^(?:\*\*|__)(?P<text>[^*_]{1,80}?):?(?:\*\*|__):?$")
LABEL_HEADING = re.compile(r"^(?P<text>[^.!?:]{1,60}):$")
RULE = re.compile(r"^[-*_=\s]{3,}$")
LEADING_DATE = re.compile(r"^\[?(?:\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{2,4})\]?\s*(?:[-\u2013\u2014:|]\s*)?")
SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'\u201c(])")
CHATTER = re.compile(
    r"^(?:here(?:'s| is| are)\b|sure\b|certainly\b|of course\b|absolutely\b|ok(?:ay)?\b|great\b|let me know\b"
    r"|feel free\b|i hope\b|hope (?:this|that)\b|if you(?:'d| would)? (?:like|want)\b|would you like\b"
    r"|(?:that|this)(?:'s| is) (?:all|everything|what)\b|these are\b|below (?:is|are)\b|as an ai\b"
    r"|i (?:don'?t|do not|can'?t|cannot|haven'?t|have not) (?:currently )?"
    r"(?:have|store|keep|retain|remember|access|save))",
    re.IGNORECASE,
)
HEADING_WORDS = 6
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
HEADING_CATEGORIES = (
    (r"allerg", "allergy"),
    (r"injur", "injury"),
    (r"health|medical|condition", "medical"),
    (r"goal|aspiration|ambition", "goal"),
    (r"schedule|availability", "schedule"),
    (r"habit|routine", "habit"),
    (r"instruction|feedback|coaching|respond|communicat", "feedback"),
    (r"preference|likes|interest|hobb|favou?rite", "preference"),
    (r"project", "project"),
    (r"work|career|job|background|about|personal|family|life", "background"),
)
WORD_CATEGORIES = (
    (r"\basthma|\bdiabet|\bmedication|\bmigraine|\bblood pressure|\bcondition\b|\bsurgery", "medical"),
    (r"\bname is\b|\bwork(?:s)? as\b|\blives? in\b|\bpartner\b|\bkids\b|\bchildren\b", "background"),
    (r"\bprefers?\b|\blikes?\b|\bloves?\b|\benjoys?\b|\bhates?\b", "preference"),
    (r"\bwriting a\b|\bbuilding a\b|\bproject\b", "project"),
    (r"\bwants? to\b|\bgoal\b|\btraining for\b", "goal"),
    (r"\bdrinks?\b|\beats?\b|\busually\b|\bevery (?:morning|evening|day)\b", "habit"),
)


@dataclass
class _Fact:
    text: str
    heading: str
    indent: int = 0
    details: list[str] = field(default_factory=list)


def pasted_facts(messages: list[dict[str, Any]], *, today: date) -> str:
    """The facts in the last user message, as the JSON the app asks for."""
    pasted = next((text_of(m) for m in reversed(messages) if m.get("role") == "user"), "")
    return json.dumps({"facts": [_as_json(fact, today) for fact in _facts(pasted)]})


def _facts(text: str) -> list[_Fact]:
    facts: list[_Fact] = []
    heading, section_start, heading_indent = "", 0, None
    for raw in text.splitlines():
        if not raw.strip() or RULE.match(raw):
            continue
        bullet = BULLET.match(raw)
        indent = len((bullet.group("indent") if bullet else raw[: len(raw) - len(raw.lstrip())]).expandtabs(4))
        line = _plain(bullet.group("text") if bullet else raw)
        sentences = [line] if bullet else [s.strip() for s in SENTENCE_BREAK.split(line) if s.strip()]
        if not line or all(_chatter(sentence) for sentence in sentences):
            continue
        if heading_indent is not None and indent <= heading_indent:
            heading, section_start, heading_indent = "", len(facts), None
        if (found := _heading(bullet.group("text").strip() if bullet else raw.strip(), bullet is not None)) is not None:
            heading, section_start, heading_indent = found, len(facts), indent if bullet else None
            continue
        parent = facts[-1] if len(facts) > section_start else None
        if parent is not None and indent > parent.indent:
            if not bullet and line[:1].islower():
                parent.text = f"{parent.text} {line}"
            else:
                parent.details.append(line)
            continue
        if bullet:
            facts.append(_Fact(line, heading, indent))
            continue
        facts.extend(_Fact(sentence, heading, indent) for sentence in sentences if not _chatter(sentence))
    return facts


def _plain(text: str) -> str:
    text = text.strip().lstrip(">").strip()
    text = re.sub(r"(\*\*|__)(.+?)\1", r"\2", text).replace("`", "")
    return LEADING_DATE.sub("", text).strip()


def _chatter(line: str) -> bool:
    return line.rstrip().endswith("?") or bool(CHATTER.match(line.strip()))


def _heading(line: str, in_list: bool) -> str | None:
    if in_list and not line.rstrip("*_ ").endswith(":"):
        return None
    for pattern in (MARKDOWN_HEADING, EMPHASIS_HEADING, LABEL_HEADING):
        if match := pattern.match(line):
            words = _plain(match.group("text")).rstrip(":").strip()
            if pattern is MARKDOWN_HEADING or len(words.split()) <= HEADING_WORDS:
                return words
    return None


def _as_json(fact: _Fact, today: date) -> dict[str, str]:
    text = " ".join(fact.text.split())
    if len(text.split()) <= 3 and fact.heading and ":" not in text and fact.heading.lower() not in text.lower():
        text = f"{fact.heading}: {text}"
    summary = clip(text)
    details = "\n".join(part for part in (text if summary != text else "", *fact.details) if part)
    category, tier = _category_and_tier(f"{text} {' '.join(fact.details)}", fact.heading, today)
    return {"summary": summary, "details": details, "category": category, "tier": tier}


def _category_and_tier(text: str, heading: str, today: date) -> tuple[str, str]:
    """What the coach would note of the fact; safety first, then the heading, then its words."""
    said = swap_person(text, FIRST_PERSON)
    for recognise in (allergy, intolerance, injury):
        if found := recognise(said, today):
            return found.note.category, "profile"
    notes = notes_in(said, today=today)
    # Something still to come is an intention when it has a date ("in April"); the import
    # carries no date, but the tier says the coach should bring it up.
    tier = "prospective" if any(note.due_at for note in notes) else "profile"
    # A heading naming two topics ("Routine and preferences") says nothing of each fact.
    named = {category for pattern, category in HEADING_CATEGORIES if re.search(pattern, heading, re.IGNORECASE)}
    if len(named) == 1:
        return named.pop(), tier
    if notes:
        return notes[0].category, tier
    for pattern, category in WORD_CATEGORIES:
        if re.search(pattern, text, re.IGNORECASE):
            return category, tier
    return "other", tier
