"""A memory's key: the name the model knows it by, unique per person.

The model names its own notes ("left-shoulder", "talk-june") and keeps saving to the same
name to keep one note per topic. What the person wrote, and anything protected, carries a
neutral key instead, its category and a number ("allergy-2"): such a key is shown to the
model, exported and kept in the history, and must not repeat what the person said
(DESIGN.md section 8). Every key is encrypted at rest all the same.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memory.models import Category
from memory.policy import MemoryFacts, is_protected

# A category and a number: a key of the same shape with any other word ("divorce-2",
# "note-0") is a name the model chose, and says what the memory says.
NEUTRAL_KEY = re.compile(rf"^(?:{'|'.join(Category.values)})-[0-9]+$")


def needs_neutral_key(facts: MemoryFacts) -> bool:
    """Whether a memory must be known by a neutral key: the person's own, or protected."""
    return is_protected(facts)


def is_neutral(key: str) -> bool:
    return bool(NEUTRAL_KEY.match(key))


def neutral_key(category: str, taken: Iterable[str]) -> str:
    """The first free key `<category>-<n>` among the person's keys."""
    used = set(taken)
    number = 1
    while f"{category}-{number}" in used:
        number += 1
    return f"{category}-{number}"
