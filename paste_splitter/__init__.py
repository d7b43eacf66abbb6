"""Another assistant's memory list, pasted by a person, split into facts by rule.

The app's memory import (memory.imports) splits a paste with it wherever the model's split
is unusable; the offline coach, standing in for that model, answers with it too. One
splitter, so the two cannot drift apart. Pure and below both: it imports nothing of the
app, of the offline coach, or of Django (import-linter holds it to that), and takes what
it must know of the app's memories (the longest summary) as an argument.
"""

from __future__ import annotations

from paste_splitter.categories import CATEGORIES, TIERS, Heading, safety_category
from paste_splitter.differences import says_otherwise
from paste_splitter.domains import SAFETY_DOMAINS, domains_of
from paste_splitter.lines import heading, is_chatter, plain
from paste_splitter.split import PastedFact, PasteSplit, clip, split_paste

__all__ = [
    "CATEGORIES",
    "SAFETY_DOMAINS",
    "TIERS",
    "Heading",
    "PasteSplit",
    "PastedFact",
    "clip",
    "domains_of",
    "heading",
    "is_chatter",
    "plain",
    "safety_category",
    "says_otherwise",
    "split_paste",
]
