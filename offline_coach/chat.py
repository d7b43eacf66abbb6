"""The coach's words in a chat turn: warm, short, and showing it remembers.

What the coach writes down stays invisible: a reply takes in what the user just said in
plain words and never talks about how it keeps track of things.
"""

from __future__ import annotations

import re

from offline_coach.phrasing import pick
from offline_coach.prompt import Remembered
from offline_coach.topics import acknowledge, is_referable, refer_back, referral_rank

MAX_SENTENCES = 4
MAX_ACKNOWLEDGEMENTS = 2
GREETING = re.compile(r"^\s*(?:hi|hello|hey|hiya|good (?:morning|afternoon|evening))\b", re.IGNORECASE)

GREETINGS = ("Hi! Good to see you.", "Hello again, good to hear from you.", "Hey, welcome back.")
OPENINGS = (
    "Thanks for telling me.",
    "Good to hear from you.",
    "Got it, thanks for the update.",
    "Thanks for checking in.",
)
ANSWERS = (
    "Good question. A reliable rule of thumb: start small, keep it regular, and adjust as you learn what works.",
    "Happy to help with that. Pick the simplest version you can do this week, then we'll build on it.",
    "Good question. Consistency beats intensity here, so aim for something you can repeat without strain.",
)
CLOSINGS = (
    "What would you like to focus on today?",
    "How are you feeling about the week ahead?",
    "Want me to sketch out the next session?",
    "What's one thing you'd like to get done before we talk again?",
)


def chat_reply(*, user_text: str, just_told: list[Remembered], remembered: list[Remembered]) -> str:
    """A 2-4 sentence reply: take in what was just said, bring up what matters, ask what's next."""
    opening = [acknowledge(item) for item in just_told[:MAX_ACKNOWLEDGEMENTS]] or [_opening(user_text)]
    told = {item.key for item in just_told}
    candidates = sorted(
        (item for item in remembered if is_referable(item) and item.key not in told),
        key=referral_rank,
    )
    references = [refer_back(item) for item in candidates[:1]]
    closing = pick(CLOSINGS, user_text, len(remembered))
    body = [*opening, *references][: MAX_SENTENCES - 1]
    return " ".join([*body, closing])


def _opening(user_text: str) -> str:
    if GREETING.match(user_text):
        return pick(GREETINGS, user_text)
    if user_text.rstrip().endswith("?"):
        return pick(ANSWERS, user_text)
    return pick(OPENINGS, user_text)
