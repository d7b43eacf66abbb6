"""What the person reviews before anything of an import is saved: the proposals split from
their paste, each marked when it reads like a memory they already have, says otherwise
than one, or repeats or contradicts an earlier proposal of the same paste; the lines that
could not be imported; and how full their store is, so the page can say what saving them
all would do to it."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from django.conf import settings

from infra import llm
from infra.hashed_words import words
from infra.llm import Embedding, LLMError
from memory import near_copies
from memory.embeddings import memory_text
from memory.imports.splitting import (
    ImportRefused,
    Mark,
    Proposal,
    SkippedLine,
    import_text_clean,
    paste_lines_checked,
    split_by_model,
    split_lines,
)
from memory.models import Memory
from memory.near_copies import CANDIDATES
from memory.policy import EPISODE, is_protected
from memory.selectors import SimilarMemory, memories_by_similarity, memory_facts_for_user, memory_list_for_user
from paste_splitter import says_otherwise

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
    # The lines left out, each named with why; and where the paste stopped being read,
    # past the most facts one import takes (the line it would have gone on from).
    skipped: tuple[SkippedLine, ...] = ()
    unread_from_line: int | None = None


def import_split(*, user: User, text: str) -> ImportSplit:
    """The proposals in a pasted answer, for the person to review; nothing is saved.

    Lines that cannot be imported are left out and named, never the whole paste; past
    IMPORT_MAX_FACTS facts the rest is left for another import, and where it starts is
    said. The model splits what is left, part by part; a part whose answer is unusable is
    split line by line instead. ImportRefused only when nothing in it can be used."""
    checked = paste_lines_checked(import_text_clean(text))
    text, unread_from_line = _within_fact_limit(checked.text)
    by_lines = split_lines(text)
    proposals, by_model = split_by_model(text)
    if not proposals:
        raise ImportRefused(NO_FACTS)
    if len(proposals) > IMPORT_MAX_FACTS:
        # The model found more facts in these lines than the line split did: the first ones go.
        proposals = proposals[:IMPORT_MAX_FACTS]
        unread_from_line = unread_from_line or _line_of(checked.text, proposals[-1].summary)
    return ImportSplit(
        proposals=tuple(_marked(user, proposals)),
        by_model=by_model,
        from_prose=by_lines.from_prose,
        room=import_room_for_user(user=user),
        skipped=checked.skipped,
        unread_from_line=unread_from_line,
    )


def import_leftovers(text: str) -> tuple[tuple[SkippedLine, ...], int | None]:
    """What of a paste is not proposed, without asking the model: the lines that cannot be
    imported, and the line past the most facts one import takes (as import_split says
    them). Nothing for a paste that cannot be used at all."""
    try:
        checked = paste_lines_checked(import_text_clean(text))
    except ImportRefused:
        return (), None
    return checked.skipped, _within_fact_limit(checked.text)[1]


def _within_fact_limit(text: str) -> tuple[str, int | None]:
    """The first lines of `text` holding at most IMPORT_MAX_FACTS facts (as the line split
    counts them), and the number of the first line left out (None when none is)."""
    lines = text.split("\n")
    if len(split_lines(text).proposals) <= IMPORT_MAX_FACTS:
        return text, None
    # The count grows with the lines taken: halve towards the last line that keeps within it.
    within, past = 0, len(lines)
    while past - within > 1:
        middle = (within + past) // 2
        if len(split_lines("\n".join(lines[:middle])).proposals) <= IMPORT_MAX_FACTS:
            within = middle
        else:
            past = middle
    first_left = next((n for n in range(within, len(lines)) if lines[n].strip()), within)
    return "\n".join(lines[:within]), first_left + 1


def _line_of(text: str, summary: str) -> int | None:
    """The number of the line after the one a fact was split from, as near as its words say."""
    for number, line in enumerate(text.split("\n"), start=1):
        if summary[:40].casefold() in line.casefold():
            return number + 1
    return None


def _marked(user: User, proposals: list[Proposal]) -> list[Proposal]:
    """Each proposal marked beside what the person keeps, through the one retrieval the
    coach searches with (memory/retrieval.py): KNOWN when it reads like a kept memory by
    the rule of a save's near-copy flag (memory/near_copies.py: close in meaning and
    sharing a word, or far closer) and says nothing otherwise; DIFFERS when it says
    otherwise than a memory the retrieval finds (paste_splitter.says_otherwise: another
    month, days or time for the same thing, another job or home). Then beside the earlier
    proposals of the same paste: REPEATS, DIFFERS_EARLIER. One embedding request for them
    all; should it fail, they are compared by their words alone."""
    kept = list(memory_list_for_user(user=user).only("pk", "summary", "content", "version", "user_id"))
    same_words = {_comparable(said): memory for memory in kept for said in (memory.summary, memory.content)}
    texts = [memory_text(summary=p.summary, content=p.details or p.summary) for p in proposals]
    try:
        embeddings = llm.embed(texts)
    except LLMError:
        embeddings = []
    marked: list[Proposal] = []
    for index, (proposal, text) in enumerate(zip(proposals, texts, strict=True)):
        vector, model = (embeddings[index].vector, embeddings[index].model) if embeddings else (None, "")
        found = memories_by_similarity(user=user, vector=vector, model=model, text=text, limit=CANDIDATES)
        mark = _beside_kept(proposal, same_words.get(_comparable(proposal.summary)), found)
        if mark.mark is Mark.NEW:
            mark = _beside_earlier(index, proposal, marked, texts, embeddings)
        marked.append(mark)
    return marked


def _beside_kept(proposal: Proposal, same: Memory | None, found: list[SimilarMemory]) -> Proposal:
    fact = f"{proposal.summary} {proposal.details}"
    if same is not None:
        return replace(proposal, mark=Mark.KNOWN, kept=same.pk, kept_version=same.version)
    for alike in found:
        memory = alike.memory
        if near_copies.is_near(alike.why) and not says_otherwise(fact, f"{memory.summary} {memory.content}"):
            return replace(proposal, mark=Mark.KNOWN, kept=memory.pk, kept_version=memory.version)
    for alike in found:
        memory = alike.memory
        if differs_in := says_otherwise(fact, f"{memory.summary} {memory.content}"):
            return replace(
                proposal, mark=Mark.DIFFERS, kept=memory.pk, kept_version=memory.version, differs_in=differs_in
            )
    return proposal


def _beside_earlier(
    index: int, proposal: Proposal, earlier: list[Proposal], texts: list[str], embeddings: list[Embedding]
) -> Proposal:
    for before in range(index):
        if _comparable(proposal.summary) == _comparable(earlier[before].summary) or (
            embeddings
            and near_copies.is_near_pair(
                _cosine(embeddings[index].vector, embeddings[before].vector),
                near_copies.shared(words(texts[index]), words(texts[before])),
                threshold=settings.MEMORY_DEDUP_THRESHOLD,
                far_threshold=settings.MEMORY_DEDUP_FAR_THRESHOLD,
            )
            and not says_otherwise(texts[index], texts[before])
        ):
            return replace(proposal, mark=Mark.REPEATS, earlier=before)
    for before in range(index):
        if differs_in := says_otherwise(texts[index], texts[before]):
            return replace(proposal, mark=Mark.DIFFERS_EARLIER, earlier=before, differs_in=differs_in)
    return proposal


def _cosine(a: list[float], b: list[float]) -> float:
    norm = math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / norm if norm else 0.0


def _comparable(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(".!;, ")


def import_room_for_user(*, user: User) -> ImportRoom:
    """How full the person's store is, as the ceiling counts it."""
    notes = [facts for facts in memory_facts_for_user(user=user) if facts.category != EPISODE]
    return ImportRoom(
        stored=len(notes), kept=sum(1 for facts in notes if is_protected(facts)), ceiling=settings.MEMORY_MAX_STORED
    )
