"""A week's plan, when the person asks for one: a short Markdown list with bold day names,
shaped by what the coach remembers (an injury keeps the impact low, a schedule of shifts
puts each session after sleep, a race gives the long run its purpose).

Only what the chat renders: a paragraph, a list, bold (`coach/rendering.py` allows them).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from offline_coach.prompt import Remembered
from offline_coach.relevance import SAFETY_CATEGORIES
from offline_coach.wording import clause

ASKS = re.compile(
    r"\b(?:plan|sketch|map out|schedule|programme|program)\b.*\b(?:week|training|sessions?|runs?|workouts?)\b"
    r"|\b(?:weekly|training|week's|workout) (?:plan|schedule|programme|program)\b",
    re.IGNORECASE,
)
EVENT_WORDS = re.compile(r"\b(?:marathon|race|5k|10k|triathlon|ultra|run)\b", re.IGNORECASE)
SHIFTS = re.compile(r"\b(?:night shifts?|shifts?|nights)\b", re.IGNORECASE)


def asks_for_plan(text: str) -> bool:
    """Whether the person asks for a plan of their week or training."""
    return bool(ASKS.search(text))


def week_plan(known: Sequence[Remembered]) -> str:
    """Four days of training and the rest, as Markdown, then how it fits their week."""
    careful = any(item.category in SAFETY_CATEGORIES and item.category != "allergy" for item in known)
    racing = any(item.category in {"goal", "project"} and EVENT_WORDS.search(item.summary) for item in known)
    shifts = [item for item in known if item.category == "schedule" and SHIFTS.search(item.summary)]
    after_sleep = " once you've slept after a shift" if shifts else ""
    days = [
        ("Monday", f"easy 30-minute run{after_sleep}, flat route, chatty pace"),
        ("Wednesday", "bike or pool, 40 minutes, instead of a second run" if careful else "intervals: 6 x 2 minutes"),
        ("Thursday", "strength and mobility, 30 minutes: hips, glutes, calves"),
        ("Saturday", "long easy run, 60 minutes" + (", the one that builds towards your race" if racing else "")),
        ("Sunday", "rest, or an easy walk"),
    ]
    lines = [f"- **{day}**: {session}" for day, session in days]
    fits = [_fits(item) for item in shifts[:1]]
    return "\n".join(lines) + ("\n\n" + " ".join(fits) if fits else "")


def _fits(item: Remembered) -> str:
    reworded = clause(item)
    if reworded:
        return f"I've put each session after your sleep, since {reworded}."
    return "I've put each session after your sleep, around your shifts."
