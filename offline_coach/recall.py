"""What the coach says about its own memory: the index, grouped, when asked "what do you
remember about me?", and an intention that is due, raised as a question.

Both read the memory block the app sent, nothing else: the index lists every memory, so
the answer is the whole of what the coach knows, in the person's words where it can't be
reworded safely.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from offline_coach.phrasing import capitalise
from offline_coach.prompt import Remembered
from offline_coach.topics import event
from offline_coach.wording import clause, each_clause, used_in

ASKS = re.compile(
    r"\bwhat (?:do|did) you (?:remember|know|recall) about me\b|\bwhat have you (?:remembered|learned|learnt)\b"
    r"|\bwhat do you (?:remember|know)\b.*\bme\b",
    re.IGNORECASE,
)
# The groups of the answer, in order, and the categories in each; weekly episodes are the
# record of past weeks, not facts about the person, and are left to the memory page.
GROUPS = (
    ("Health and safety", frozenset({"injury", "allergy", "medical", "safety", "constraint"})),
    ("Goals and plans", frozenset({"goal", "project"})),
    ("Your routine", frozenset({"schedule", "habit"})),
    ("How you like to be coached", frozenset({"feedback"})),
    ("About you", frozenset({"background", "preference", "reference", "other", ""})),
)
# Each in other words when asked again in one conversation.
NOTHING_YET = (
    "I don't know much about you yet. Tell me what you're working on, and anything I should keep "
    "in mind, such as an injury or an allergy.",
    "Still very little, I'm afraid: what are you working on at the moment?",
    "Nothing yet. What would you like me to know first?",
)
LEADS = ("Here's what I keep in mind about you:", "Here it is as it stands now:", "This is what I have:")
OUTROS = (
    "If any of it is out of date, tell me, or change it on your memory page.",
    "Tell me if anything has changed since.",
    "Anything to add or put right?",
)


def asks_what_is_remembered(text: str) -> bool:
    """Whether the person asks what the coach remembers about them."""
    return bool(ASKS.search(text))


def remembered_reply(known: Sequence[Remembered], earlier_replies: Sequence[str] = ()) -> str:
    """The index as Markdown: a bold heading per group, one line per memory."""
    sections = []
    for heading, categories in GROUPS:
        lines = [f"- {_line(item)}" for item in known if item.category in categories]
        if lines:
            sections.append("\n".join([f"**{heading}**", *lines]))
    if not sections:
        return _unsaid(NOTHING_YET, earlier_replies) or "Nothing yet."
    parts = [_unsaid(LEADS, earlier_replies), *sections, _unsaid(OUTROS, earlier_replies)]
    return "\n\n".join(part for part in parts if part)


def _unsaid(options: Sequence[str], earlier_replies: Sequence[str]) -> str:
    """The first of `options` no earlier reply said; "" once all were."""
    return next((option for option in options if not any(option in reply for reply in earlier_replies)), "")


def due_question(known: Sequence[Remembered], earlier_replies: Sequence[str]) -> str | None:
    """A question about the first intention that is due and not yet raised in this conversation."""
    for item in known:
        if item.bring_up and not any(used_in(item, reply) for reply in earlier_replies):
            about = event(item)
            if about.startswith("your "):
                return f"{capitalise(about)} is coming up: how is it going?"
            reworded = clause(item)
            return f"You told me {reworded}: how is it going?" if reworded else "How is your plan going?"
    return None


def _line(item: Remembered) -> str:
    # A list line stands alone, so the person's own words may stand as they wrote them.
    reworded = each_clause(item)
    return capitalise("; ".join(reworded)) if reworded else item.summary.rstrip(" .")
