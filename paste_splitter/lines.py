"""One line of a paste: a bullet or not, a heading or not, the assistant's own chatter or
a fact, and its words without their Markdown."""

from __future__ import annotations

import re

BULLET = re.compile(
    r"^(?P<indent>[ \t]*)(?:[-*+\u2022\u2023\u2043\u2219\u25aa\u25cf\u25e6\u2013\u2014]|\(?\d{1,3}[.)]|\(?[a-z][.)])"
    r"\s+(?P<text>\S.*)$"
)
MARKDOWN_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(?P<text>.+?)\s*#*\s*$")
EMPHASIS_HEADING = re.compile(r"^(?:\*\*|__)(?P<text>[^*_]{1,80}?):?(?:\*\*|__):?$")
LABEL_HEADING = re.compile(r"^(?P<text>[^.!?:]{1,60}):$")
RULE = re.compile(r"^[-*_=\s]{3,}$")
# A date an export puts before each memory: "[2025-03-01] - ..." or "2025-03-01: ...".
LEADING_DATE = re.compile(r"^\[?(?:\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{2,4})\]?\s*(?:[-\u2013\u2014:|]\s*)?")
SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'\u201c(])")
# What an assistant says about itself around the list, rather than about the person.
CHATTER = re.compile(
    r"^(?:here(?:'s| is| are)\b|sure\b|certainly\b|of course\b|absolutely\b|ok(?:ay)?\b|great\b|"
    r"let me know\b|feel free\b|i hope\b|hope (?:this|that)\b|if you(?:'d| would)? (?:like|want)\b|"
    r"would you like\b|do you want\b|is there anything\b|(?:that|this)(?:'s| is) (?:all|everything|what)\b|"
    r"these are\b|below (?:is|are)\b|as an ai\b|"
    r"i (?:don'?t|do not|can'?t|cannot|haven'?t|have not|didn'?t|did not) (?:currently )?"
    r"(?:have|store|keep|retain|remember|access|save))",
    re.IGNORECASE,
)
# Longer than this, a line that looks like a heading ("Health:") is a sentence; a Markdown
# heading ("## ...") is one at any length.
MAX_HEADING_WORDS = 6


def plain(text: str) -> str:
    """A line without its Markdown: emphasis, code ticks, quote marks, a leading date."""
    text = text.strip().lstrip(">").strip()
    text = re.sub(r"(\*\*|__)(.+?)\1", r"\2", text)
    text = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"\1", text)
    text = text.replace("`", "")
    return LEADING_DATE.sub("", text).strip()


def is_chatter(line: str) -> bool:
    """Whether the line is the assistant talking (a question, an offer, "Here's what I
    know:", that it has nothing saved) rather than a fact about the person."""
    return line.rstrip().endswith("?") or bool(CHATTER.match(line.strip()))


def heading(line: str, *, in_list: bool = False) -> str | None:
    """The words of a heading line ("## Health", "**Health**", "Health:"), else None. In a
    list only a label ending in a colon is one: "- **Allergic to peanuts**" is a fact."""
    if in_list and not line.rstrip("*_ ").endswith(":"):
        return None
    for pattern in (MARKDOWN_HEADING, EMPHASIS_HEADING, LABEL_HEADING):
        if match := pattern.match(line):
            words = plain(match.group("text")).rstrip(":").strip()
            if len(words.split()) <= MAX_HEADING_WORDS or pattern is MARKDOWN_HEADING:
                return words
    return None


def sentences(line: str) -> list[str]:
    """A line of prose, one sentence at a time."""
    return [sentence.strip() for sentence in SENTENCE_BREAK.split(line) if sentence.strip()]
