"""How the coach speaks about one remembered item: "your left shoulder", "your talk in June".

Items come from the system prompt (written by the app, the user or this coach), so every
phrase here falls back to the item's own summary when its key or summary is not in a
shape this coach writes.
"""

from __future__ import annotations

import calendar
import re
from datetime import date, datetime

from offline_coach.phrasing import (
    join_words,
    lower_first,
    second_person_words,
)
from offline_coach.prompt import Remembered

MONTH_WORDS = frozenset(name.lower() for name in [*calendar.month_name, *calendar.month_abbr, "sept"] if name)
KEY_FILLERS = frozenset({"allergy", "goal", "intolerance", "next", "week", "month", "year", "tomorrow"})
LIMIT_PREFIX = re.compile(r"^(?:no|avoid|avoiding|nothing|without|stay away from|steer clear of)\s+", re.IGNORECASE)
SAFETY_CATEGORIES = ("injury", "allergy", "constraint", "safety", "medical")
# The order the coach brings things up in: safety first, then what is coming, then the rest.
REFERRAL_ORDER = (*SAFETY_CATEGORIES, "project", "goal", "schedule", "habit", "background", "preference", "other")


def referral_rank(item: Remembered) -> int:
    """Lower comes first; items the coach never brings up unprompted (style, episodes) rank last."""
    category = "project" if item.due_at and item.category not in SAFETY_CATEGORIES else item.category
    return REFERRAL_ORDER.index(category) if category in REFERRAL_ORDER else len(REFERRAL_ORDER)


def is_referable(item: Remembered) -> bool:
    """Whether the coach would bring the item up in conversation."""
    return referral_rank(item) < len(REFERRAL_ORDER)


def body_part(item: Remembered) -> str:
    """ "left shoulder" for an injury keyed `left-shoulder`; else the condition it describes."""
    condition = item.summary.split(":", 1)[0].strip().lower()
    words = item.key.split("-")
    if all(word in condition.split() for word in words):
        return " ".join(words)
    return second_person_words(condition)


def injury_limit(item: Remembered) -> str | None:
    """ "overhead pressing" for "Bad left shoulder: no overhead pressing"; None without a "no ..." limit."""
    _, _, limit = item.summary.partition(":")
    limit = limit.strip().rstrip(".")
    return LIMIT_PREFIX.sub("", limit) if LIMIT_PREFIX.match(limit) else None


def allergens(item: Remembered) -> str:
    """ "peanuts and shellfish" for `allergy-peanuts-shellfish`; else the summary's "allergic to" part."""
    if match := re.search(r"allergic to (.+)$", item.summary, re.IGNORECASE):
        return match.group(1).rstrip(".").lower()
    words = [word for word in item.key.split("-") if word not in KEY_FILLERS]
    return join_words(words) if words else lower_first(item.summary)


def event(item: Remembered) -> str:
    """ "your talk in June" for `talk-june` due on 1 June; else the summary, addressed to the reader."""
    words = [word for word in item.key.split("-") if word not in MONTH_WORDS | KEY_FILLERS and not word.isdigit()]
    if not words:
        return lower_first(second_person_words(item.summary))
    when = when_due(item)
    return f"your {' '.join(words)} {when}".strip()


def when_due(item: Remembered) -> str:
    """ "in June" for a due date on the 1st, "on 12 May" otherwise, "" without one."""
    due = due_date(item)
    if due is None:
        return ""
    month = calendar.month_name[due.month]
    return f"in {month}" if due.day == 1 else f"on {due.day} {month}"


def due_date(item: Remembered) -> date | None:
    """The item's due date, if it has a readable one."""
    if not item.due_at:
        return None
    try:
        return datetime.fromisoformat(item.due_at.replace("Z", "+00:00")).date()
    except ValueError:
        return None


def goal(item: Remembered) -> str:
    """ "run a marathon" for "Goal: run a marathon"."""
    text = re.sub(r"^goal:\s*", "", item.summary.strip(), flags=re.IGNORECASE).rstrip(".")
    return lower_first(second_person_words(text))


def about(item: Remembered) -> str:
    """A noun phrase for the item, addressed to the user: "your left shoulder"."""
    category = item.category
    if category == "injury":
        return f"your {body_part(item)}"
    if category == "allergy":
        return f"your allergy to {allergens(item)}"
    if item.due_at or category == "project":
        return event(item)
    if category == "goal":
        return f"your goal to {goal(item)}"
    if category == "episode" or item.tier == "episodic":
        return "what we worked on recently"
    if category == "schedule":
        return "your weekly routine"
    return lower_first(second_person_words(item.summary.rstrip(".")))


def mentioned_in(item: Remembered, text: str) -> bool:
    """Whether `text` already talks about the item: its phrase, its summary or every distinctive key word."""
    lower = text.lower()
    if about(item).lower() in lower or item.summary.lower() in lower:
        return True
    words = [word for word in item.key.split("-") if word not in MONTH_WORDS | KEY_FILLERS and len(word) > 2]
    words = [word for word in words if not word.isdigit()]
    return bool(words) and all(re.search(rf"\b{re.escape(word)}", lower) for word in words)
