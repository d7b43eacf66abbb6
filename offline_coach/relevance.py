"""Which remembered items a reply should use: the few closest in meaning to what the person
just wrote, and the safety notes whenever the message touches their topic.

Closeness is the cosine of the embeddings this server serves (all-MiniLM-L6-v2, or its bag
of words when the model is not installed), above a floor. A safety note counts by topic,
not by closeness: "what should I eat?" is far from "allergic to peanuts" in meaning, and
is exactly when the allergy matters. What earlier replies of the conversation already used
goes last, so one memory does not come up in every reply unless it is the relevant one.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from offline_coach import minilm
from offline_coach.bag_of_words import MODEL_NAME as BAG_OF_WORDS
from offline_coach.bag_of_words import bag_of_words_embedding
from offline_coach.prompt import Remembered

MAX_USED = 3
# Cosines from which an item reads as about the same thing, per model: measured on coaching
# facts, a question and the fact it needs score 0.35-0.9 with MiniLM, unrelated ones below 0.3.
MINILM_FLOOR = 0.35
BAG_OF_WORDS_FLOOR = 0.3
EMBEDDING_CACHE_TEXTS = 2048


@dataclass(frozen=True)
class Topic:
    """A topic where a safety note matters: words in a message, words in a memory."""

    name: str
    message: re.Pattern[str]
    memory: re.Pattern[str]


def _words(text: str) -> re.Pattern[str]:
    return re.compile(rf"\b(?:{text})", re.IGNORECASE)


TOPICS = (
    Topic(
        "food",
        _words(r"eat|food|meal|breakfast|lunch|dinner|snack|cook|recipe|diet|nutrition|fuel|carb|protein|drink"),
        _words(r"allerg|intoleran|coeliac|celiac|vegan|vegetarian|gluten|lactose|nut\b|nuts\b|peanut|shellfish"),
    ),
    Topic(
        "exercise",
        _words(
            r"run|jog|train|workout|work out|exercise|gym|lift|session|plan|week|race|marathon|squat|stretch"
            r"|swim|cycl|hike|walk|sport"
        ),
        _words(
            r"injur|knee|shin|ankle|hip|back\b|shoulder|wrist|elbow|hamstring|achilles|fracture|sprain|strain"
            r"|tendon|pain|hurt|surgery|asthma|heart"
        ),
    ),
    Topic(
        "sleep",
        _words(r"sleep|tired|rest\b|insomnia|nap|fatigue|exhausted|bed\b|wake|awake"),
        _words(r"night shift|shift work|shifts|nights\b|insomnia|sleep"),
    ),
)
SAFETY_CATEGORIES = frozenset({"injury", "allergy", "constraint", "safety", "medical"})
# Items a reply never brings up unprompted: how to coach (it shapes every reply instead) and
# the record of past weeks.
NEVER_USED = frozenset({"feedback", "episode"})


def text_of_item(item: Remembered) -> str:
    """What an item says: its summary, and its note when that adds to it."""
    content = item.content.strip()
    return item.summary if not content or content in item.summary else f"{item.summary}. {content}"


def topics_of(text: str) -> set[str]:
    """The safety topics a message touches. A question about food is about food, whatever
    it is for: "what should I eat before a long run?" needs the allergy, not the knee."""
    touched = {topic.name for topic in TOPICS if topic.message.search(text)}
    return touched - {"exercise"} if "food" in touched else touched


def item_topics(item: Remembered) -> set[str]:
    """The safety topics an item concerns: a safety note by its words, a schedule of night
    shifts for sleep."""
    if item.category not in SAFETY_CATEGORIES and item.category != "schedule":
        return set()
    text = text_of_item(item)
    # A limit on training ("No downhill running") names the activity, not an injury.
    activity = {"exercise"} if item.category == "constraint" and TOPICS[1].message.search(text) else set()
    return {topic.name for topic in TOPICS if topic.memory.search(text)} | activity


def relevant(text: str, items: Sequence[Remembered], *, used_before: Sequence[str] = ()) -> list[Remembered]:
    """At most MAX_USED items for a reply to `text`: safety notes on its topics, then the
    closest in meaning above the floor; what `used_before` (keys, one per earlier use)
    holds goes after the rest, so each comes up where it matters, not in every reply."""
    candidates = [item for item in items if item.category not in NEVER_USED]
    if not candidates or not text.strip():
        return []
    scores = dict(zip((item.key for item in candidates), _similarities(text, candidates), strict=True))
    floor = _floor()
    touched = topics_of(text)
    safety = [item for item in candidates if item_topics(item) & touched]
    close = [item for item in candidates if scores[item.key] >= floor and item not in safety]
    uses = {key: used_before.count(key) for key in set(used_before)}

    def order(item: Remembered) -> tuple[int, float]:
        return (uses.get(item.key, 0), -scores[item.key])

    return [*sorted(safety, key=order), *sorted(close, key=order)][:MAX_USED]


def closest(text: str, items: Sequence[Remembered], *, floor: float | None = None) -> Remembered | None:
    """The item closest in meaning to `text`, if any is above the floor (the model's own by default)."""
    if not items:
        return None
    if floor is None:
        floor = _floor()
    score, item = max(zip(_similarities(text, items), items, strict=True), key=lambda pair: pair[0])
    return item if score >= floor else None


def _floor() -> float:
    return MINILM_FLOOR if minilm.is_available() else BAG_OF_WORDS_FLOOR


def _similarities(text: str, items: Sequence[Remembered]) -> list[float]:
    model = minilm.MODEL_NAME if minilm.is_available() else BAG_OF_WORDS
    query = _embedding(text, model)
    return [_cosine(query, _embedding(text_of_item(item), model)) for item in items]


@functools.lru_cache(maxsize=EMBEDDING_CACHE_TEXTS)
def _embedding(text: str, model: str) -> tuple[float, ...]:
    # Cached: the same memories come with every request of a conversation.
    if model == minilm.MODEL_NAME:
        return tuple(minilm.embed([text])[0])
    return tuple(bag_of_words_embedding(text))


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    norm = math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / norm if norm else 0.0
