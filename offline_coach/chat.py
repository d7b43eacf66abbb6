"""The coach's words in a chat turn: warm, short, and showing it remembers what matters.

What the coach writes down stays invisible: a reply takes in what the person just said in
plain words and never talks about how it keeps track of things. What it brings up is what
the message needs (`relevance`), reworded into the reply (`wording`), not the same note
every time; a plan comes as a short Markdown list, "what do you remember?" as the index,
grouped, and an intention that is due as the question that ends the reply.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from offline_coach.corrections import Changed
from offline_coach.phrasing import join_words, pick
from offline_coach.plans import asks_for_plan, week_plan
from offline_coach.prompt import Remembered
from offline_coach.recall import asks_what_is_remembered, due_question, remembered_reply
from offline_coach.relevance import item_topics, relevant, topics_of
from offline_coach.topics import acknowledge
from offline_coach.wording import clause, quoted, used_in

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
# A first answer on the topics where a safety note most often matters.
TOPIC_ANSWERS = {
    "food": "Keep it simple and familiar: mostly carbohydrate (rice, pasta or potatoes), a little protein, "
    "not much fat or fibre, and water with it.",
    "sleep": "Sleep mends with routine first: the same sleep and wake times, a dark, cool room, and no "
    "caffeine in the six hours before you go to bed.",
}
# How a safety note shapes the answer, by the topic the message and the note share.
SINCE = {
    "food": "Since {clause}, read every label and leave out anything you are not sure of.",
    "exercise": "Since {clause}, we'll keep the impact low and stop at the first sign of pain.",
    "sleep": "Since {clause}, keep one fixed sleep window after each shift, with the room dark and the phone away.",
}
QUOTED_SINCE = {
    "food": "I'll keep it out of anything I suggest.",
    "exercise": "We'll keep the impact low and stop at the first sign of pain.",
    "sleep": "We'll plan your rest around it.",
}
PLAN_OPENING = "Here's a week to start from."
CLOSINGS = (
    "What would you like to focus on today?",
    "How are you feeling about the week ahead?",
    "Want me to sketch out the next session?",
    "What's one thing you'd like to get done before we talk again?",
)


def chat_reply(
    *,
    user_text: str,
    just_told: list[Remembered],
    remembered: list[Remembered],
    earlier_replies: Sequence[str] = (),
    changed: Sequence[Changed] = (),
) -> str:
    """The reply: take in what was just said or changed, bring up what the message needs,
    and end on a question (an intention that is due, when there is one)."""
    told = {item.key for item in just_told} | {change.item.key for change in changed}
    now_reads = {change.item.key: change.item for change in changed if change.action == "updated"}
    deleted = {change.item.key for change in changed if change.action == "deleted"}
    known = [now_reads.get(item.key, item) for item in remembered if item.key not in deleted]
    if asks_what_is_remembered(user_text):
        return remembered_reply(known)
    used_before = [item.key for reply in earlier_replies for item in known if used_in(item, reply)]
    chosen = relevant(user_text, [item for item in known if item.key not in told], used_before=used_before)
    plan = asks_for_plan(user_text)
    opening = PLAN_OPENING if plan and not (changed or just_told) else _opening(user_text, just_told, changed)
    references = _references(chosen, user_text)
    if plan:
        return "\n\n".join([" ".join([opening, *references]), week_plan(known)])
    closing = due_question(known, earlier_replies) or pick(CLOSINGS, user_text, len(remembered))
    return " ".join([opening, *references, closing])


def _opening(user_text: str, just_told: list[Remembered], changed: Sequence[Changed]) -> str:
    if changed:
        return " ".join(_taken_in(change) for change in changed[:MAX_ACKNOWLEDGEMENTS])
    if just_told:
        return " ".join(acknowledge(item) for item in just_told[:MAX_ACKNOWLEDGEMENTS])
    if GREETING.match(user_text):
        return pick(GREETINGS, user_text)
    for topic in sorted(topics_of(user_text)):
        if topic in TOPIC_ANSWERS and user_text.rstrip().endswith("?"):
            return TOPIC_ANSWERS[topic]
    if user_text.rstrip().endswith("?"):
        return pick(ANSWERS, user_text)
    return pick(OPENINGS, user_text)


def _taken_in(change: Changed) -> str:
    """A correction taken in, said as the app answered it."""
    if change.action == "proposed":
        # Protected: the app keeps it as it stands until the person confirms the change.
        return (
            "Thanks for putting me right. That one is a note you gave me yourself, so the change waits "
            "for you to confirm it on your memory page; until then I'll go by what it says."
        )
    if change.action == "deleted":
        return "Got it, thanks for putting me right: I'll leave that behind."
    reworded = clause(change.item)
    thanks = "Got it, thanks for putting me right"
    return f"{thanks}: {reworded} now." if reworded else f"{thanks}."


def _references(items: Sequence[Remembered], user_text: str) -> list[str]:
    """A sentence per item, shaped by the topic it shares with the message; items on one
    topic share one sentence ("Since you have a bad left knee and ..., we'll ...")."""
    by_topic: dict[str, list[str]] = {}
    others = []
    for item in items:
        shared = sorted(item_topics(item) & topics_of(user_text))
        reworded = clause(item, about=user_text)
        if shared and reworded:
            by_topic.setdefault(shared[0], []).append(reworded)
        elif shared:
            others.append(f"{quoted(item, about=user_text)} {QUOTED_SINCE[shared[0]]}")
        elif reworded:
            others.append(f"And since {reworded}, I've kept that in mind.")
        else:
            others.append(f"{quoted(item, about=user_text)} I've kept that in mind.")
    return [*(SINCE[topic].format(clause=join_words(said)) for topic, said in by_topic.items()), *others]
