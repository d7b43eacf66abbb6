"""What the person reviews before anything of an import is saved: the proposals split from
their paste, each marked when it reads like a memory they already have or like an earlier
proposal of the same paste, and how full their store is, so the page can say what saving
them all would do to it."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from django.conf import settings

from infra import llm
from infra.hashed_words import words
from infra.llm import LLMError
from memory import near_copies
from memory.embeddings import memory_text
from memory.imports.splitting import ImportRefused, Proposal, import_text_clean, split_by_model, split_lines
from memory.policy import EPISODE, is_protected
from memory.selectors import memories_by_similarity, memory_facts_for_user, memory_list_for_user

if TYPE_CHECKING:
    from accounts.models import User

# Each proposal is six form fields, and Django takes at most 1,000 in one form.
IMPORT_MAX_FACTS = 100

NO_FACTS = (
    "No facts about you were found in this: it reads as the assistant talking about itself "
    "(for example, saying it has nothing saved). Ask it again with the prompt above, or add "
    "memories yourself on the memory page."
)


@dataclass(frozen=True)
class ImportRoom:
    """The person's store as the ceiling counts it (weekly episodes apart)."""

    stored: int
    kept: int
    ceiling: int

    def after(self, added: int) -> ImportRoomAfter:
        return ImportRoomAfter(
            added=added,
            to_forget=max(0, min(self.stored + added - self.ceiling, self.stored - self.kept)),
            kept_over=max(0, self.kept + added - self.ceiling),
            ceiling=self.ceiling,
        )


@dataclass(frozen=True)
class ImportRoomAfter:
    """What saving `added` memories does to the store: how many of the coach's own notes
    go to make room, and by how many what is kept for good passes the ceiling."""

    added: int
    to_forget: int
    kept_over: int
    ceiling: int


@dataclass(frozen=True)
class ImportSplit:
    proposals: tuple[Proposal, ...]
    # False when any part of the paste was split line by line instead of by the model.
    by_model: bool
    # No list, no line per fact: each sentence was proposed on its own.
    from_prose: bool
    room: ImportRoom


def import_split(*, user: User, text: str) -> ImportSplit:
    """The proposals in a pasted answer, for the person to review; nothing is saved.

    The model splits it, part by part; a part whose answer is unusable is split line by
    line instead. ImportRefused when the paste cannot be used, has no fact in it, or has
    more than IMPORT_MAX_FACTS."""
    text = import_text_clean(text)
    by_lines = split_lines(text)
    if len(by_lines.proposals) > IMPORT_MAX_FACTS:
        raise ImportRefused(_too_many_message(len(by_lines.proposals)))
    proposals, by_model = split_by_model(text)
    if not proposals:
        raise ImportRefused(NO_FACTS)
    if len(proposals) > IMPORT_MAX_FACTS:
        raise ImportRefused(_too_many_message(len(proposals)))
    proposals = _marked(user, proposals)
    return ImportSplit(
        proposals=tuple(proposals),
        by_model=by_model,
        from_prose=by_lines.from_prose,
        room=import_room_for_user(user=user),
    )


def _marked(user: User, proposals: list[Proposal]) -> list[Proposal]:
    """Each proposal marked `known` when it reads like a memory the person has, or `repeats`
    when it reads like an earlier proposal of the same paste, by the rule of a save's
    near-copy flag (memory/near_copies.py): close in meaning and sharing a word, or far
    closer. Both are offered unticked. One embedding request for them all; should it fail,
    only the same words count."""
    known = {_comparable(said) for m in memory_list_for_user(user=user) for said in (m.summary, m.content)}
    texts = [memory_text(summary=p.summary, content=p.details or p.summary) for p in proposals]
    try:
        embeddings = llm.embed(texts)
    except LLMError:
        embeddings = []
    marked: list[Proposal] = []
    for index, (proposal, text) in enumerate(zip(proposals, texts, strict=True)):
        same = _comparable(proposal.summary) in known
        earlier = any(_comparable(proposal.summary) == _comparable(p.summary) for p in proposals[:index])
        if embeddings and not same:
            vector, model = embeddings[index].vector, embeddings[index].model
            found = memories_by_similarity(
                user=user, vector=vector, model=model, text=text, limit=near_copies.CANDIDATES
            )
            same = any(near_copies.is_near(f.why) for f in found)
        if embeddings and not earlier:
            earlier = any(
                near_copies.is_near_pair(
                    _cosine(embeddings[index].vector, embeddings[before].vector),
                    near_copies.shared(words(text), words(texts[before])),
                    threshold=settings.MEMORY_DEDUP_THRESHOLD,
                    far_threshold=settings.MEMORY_DEDUP_FAR_THRESHOLD,
                )
                for before in range(index)
            )
        marked.append(replace(proposal, known=same, repeats=earlier and not same))
    return marked


def _cosine(a: list[float], b: list[float]) -> float:
    norm = math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / norm if norm else 0.0


def _too_many_message(count: int) -> str:
    return (
        f"That is {count} facts; an import takes at most {IMPORT_MAX_FACTS} at a time. "
        "Paste the first part now, save it, then import the rest."
    )


def _comparable(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(".!;, ")


def import_room_for_user(*, user: User) -> ImportRoom:
    """How full the person's store is, as the ceiling counts it."""
    notes = [facts for facts in memory_facts_for_user(user=user) if facts.category != EPISODE]
    return ImportRoom(
        stored=len(notes), kept=sum(1 for facts in notes if is_protected(facts)), ceiling=settings.MEMORY_MAX_STORED
    )
