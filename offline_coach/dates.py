"""Dates in what a user says ("in June", "on 12 May", "next month"), resolved against today.

A due date is a day, sent as an ISO date: the app reads it as the morning of that day on
the person's own clock, which this server does not know. A month alone means its 1st: this month's while we are in it,
otherwise the next such month. A day and month means its next occurrence (today counts).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date, timedelta

MONTHS = {name.lower(): number for number, name in enumerate(calendar.month_name) if name}
MONTHS |= {name.lower(): number for number, name in enumerate(calendar.month_abbr) if name}
MONTHS["sept"] = 9
WEEKDAYS = {name.lower(): number for number, name in enumerate(calendar.day_name)}
NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "eight": 8}

_MONTH = "(" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_WEEKDAY = "(" + "|".join(WEEKDAYS) + ")"
_YEAR = r"(?:,?\s+(\d{4}))?"
_ORDINAL = r"(\d{1,2})(?:st|nd|rd|th)?"

PATTERNS = {
    "iso": re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b"),
    "day_month": re.compile(rf"\b{_ORDINAL}(?:\s+of)?\s+{_MONTH}{_YEAR}\b", re.IGNORECASE),
    "month_day": re.compile(rf"\b{_MONTH}\s+{_ORDINAL}\b{_YEAR}", re.IGNORECASE),
    # A bare month needs a word before it, or "I may" would be a date.
    "month": re.compile(
        rf"\b(?:in|this|next|by|during|until|before|for|early|mid|late|end of|start of|beginning of)\s+"
        rf"(?:early\s+|mid-?\s*|late\s+)?{_MONTH}{_YEAR}\b",
        re.IGNORECASE,
    ),
    "next_weekday": re.compile(rf"\b(?:next|this)\s+{_WEEKDAY}\b", re.IGNORECASE),
    "relative": re.compile(r"\b(tomorrow|next week|next month|next year)\b", re.IGNORECASE),
    "in_units": re.compile(
        r"\bin\s+(\d+|a|an|one|two|three|four|five|six|eight)\s+(day|week|month)s?\b", re.IGNORECASE
    ),
}


@dataclass(frozen=True)
class DueDate:
    """A date found in a sentence: where it was said, when it falls, and how to write it."""

    start: int
    end: int
    day: date
    month_only: bool
    relative: bool

    @property
    def due_at(self) -> str:
        """The ISO date: the form a prospective memory's `due_at` takes."""
        return self.day.isoformat()

    @property
    def label(self) -> str:
        """ "June 2026" for a month, "12 May 2026" for a day."""
        month = calendar.month_name[self.day.month]
        return f"{month} {self.day.year}" if self.month_only else f"{self.day.day} {month} {self.day.year}"


def find_due_date(sentence: str, today: date) -> DueDate | None:
    """The first date `sentence` names, resolved against `today`; None if it names none."""
    found: list[DueDate] = []
    for kind, pattern in PATTERNS.items():
        for match in pattern.finditer(sentence):
            if resolved := _resolve(kind, match, today):
                found.append(resolved)
    return min(found, key=lambda due: (due.start, -due.end)) if found else None


def month_name(day: date) -> str:
    """ "June" for any day in June."""
    return calendar.month_name[day.month]


def _resolve(kind: str, match: re.Match[str], today: date) -> DueDate | None:
    span = match.span()
    try:
        if kind == "iso":
            day = date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
            return DueDate(*span, day=day, month_only=False, relative=False)
        if kind == "day_month":
            return _day_in_month(span, int(match.group(1)), match.group(2), match.group(3), today)
        if kind == "month_day":
            return _day_in_month(span, int(match.group(2)), match.group(1), match.group(3), today)
        if kind == "month":
            return _month(span, match.group(1), match.group(2), today)
    except ValueError:
        return None  # "31 February"
    if kind == "next_weekday":
        ahead = (WEEKDAYS[match.group(1).lower()] - today.weekday()) % 7 or 7
        return DueDate(*span, day=today + timedelta(days=ahead), month_only=False, relative=True)
    if kind == "relative":
        phrase = match.group(1).lower()
        month_only = phrase in {"next month", "next year"}
        return DueDate(*span, day=_relative(phrase, today), month_only=month_only, relative=True)
    count = NUMBER_WORDS.get(match.group(1).lower()) or int(match.group(1))
    return DueDate(*span, day=_after(today, count, match.group(2).lower()), month_only=False, relative=True)


def _day_in_month(span: tuple[int, int], day_number: int, month: str, year: str | None, today: date) -> DueDate:
    number = MONTHS[month.lower()]
    if year:
        return DueDate(*span, day=date(int(year), number, day_number), month_only=False, relative=False)
    day = date(today.year, number, day_number)
    if day < today:
        day = date(today.year + 1, number, day_number)
    return DueDate(*span, day=day, month_only=False, relative=False)


def _month(span: tuple[int, int], month: str, year: str | None, today: date) -> DueDate:
    number = MONTHS[month.lower()]
    if year:
        return DueDate(*span, day=date(int(year), number, 1), month_only=True, relative=False)
    # While we are in that month, "in June" means this June, not next year's.
    day = date(today.year + 1 if today.month > number else today.year, number, 1)
    return DueDate(*span, day=day, month_only=True, relative=False)


def _relative(phrase: str, today: date) -> date:
    if phrase == "tomorrow":
        return today + timedelta(days=1)
    if phrase == "next week":
        return today + timedelta(days=7 - today.weekday())  # next Monday
    if phrase == "next month":
        return _after(today, 1, "month").replace(day=1)
    return date(today.year + 1, 1, 1)


def _after(today: date, count: int, unit: str) -> date:
    if unit == "day":
        return today + timedelta(days=count)
    if unit == "week":
        return today + timedelta(weeks=count)
    month_index = today.month - 1 + count
    year, month = today.year + month_index // 12, month_index % 12 + 1
    return date(year, month, min(today.day, calendar.monthrange(year, month)[1]))
