"""Bringing in what another assistant knows about a person: its answer, pasted, split into
proposed memories the person reviews, then saved as their own.

The split is asked of the model first (a JSON answer for each part of the paste) and the
answer is checked like anything a client sends. Whatever it gets wrong (no JSON, the wrong
shape, nothing, a field no memory may have, facts left out, an error), that part of the
paste is split line by line instead (`paste_splitter`), so an import never depends on the
model: one fact per line or bullet, a heading ("## Health") as a hint of the category.
Nothing is stored between the paste and the save: the proposals travel in the review form,
and only what the person ticks becomes a memory.

Saved memories are the person's own (`user`): protected, neutrally named, and, like every
write of theirs, never refused for space (memory.policy, rule 4); the store's ceiling is
kept by forgetting the coach's oldest notes, in the same transaction.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from infra import llm
from infra.prompts import prompt
from memory.drafts import MemoryDraft, MemoryInvalid, validate_draft
from memory.embeddings import memory_text
from memory.keys import neutral_key
from memory.models import SUMMARY_MAX_CHARS, Category, Memory, MemoryEvent, Source, Tier
from memory.policy import EPISODE, Eviction, is_protected
from memory.selectors import memory_facts_for_user, memory_list_for_user
from memory.services import memory_save
from memory.store import lock_user
from paste_splitter import clip, heading, is_chatter, plain, split_paste

if TYPE_CHECKING:
    from accounts.models import User

logger = logging.getLogger(__name__)

# A memory list is a few thousand characters; this is several times that. Kept well below
# REQUEST_BODY_MAX_BYTES: the review form sends the paste back beside the proposals made of
# it, so a body holds it about twice, and a character can take 12 bytes in a form body (4
# in UTF-8, each percent-encoded).
IMPORT_MAX_CHARS = 20_000
# Each proposal is six form fields, and Django takes at most 1,000 in one form.
IMPORT_MAX_FACTS = 100
# Lines of the paste the model is given at once: its answer must fit COACH_MAX_TOKENS.
MODEL_CHUNK_LINES = 40
# Weekly episodes are the coach's summaries of a week, not facts someone else knew.
IMPORT_CATEGORIES = tuple(value for value in Category.values if value != Category.EPISODE)
IMPORT_REASON = "imported from another assistant"

EMPTY = "Paste the other assistant's answer into the box first: it is empty."
NO_FACTS = (
    "No facts about you were found in this: it reads as the assistant talking about itself "
    "(for example, saying it has nothing saved). Ask it again with the prompt above, or add "
    "memories yourself on the memory page."
)


class ImportRefused(Exception):
    """A paste that cannot be split into proposals; the message is for the person."""


class ImportInvalid(Exception):
    """Ticked proposals that cannot be saved as they are: for each one's place in the
    list, its field names (`summary`, `details`, `tier`, `category`) and what is wrong."""

    def __init__(self, errors: dict[int, dict[str, str]]) -> None:
        super().__init__(f"{len(errors)} proposals cannot be saved as they are")
        self.errors = errors


@dataclass(frozen=True)
class Proposal:
    """One fact as proposed for the person to keep, edit or drop."""

    summary: str
    details: str = ""
    category: str = Category.OTHER
    tier: str = Tier.PROFILE
    # It reads exactly like a memory the person already has: offered unticked.
    known: bool = False


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


@dataclass(frozen=True)
class ImportOutcome:
    saved: tuple[Memory, ...]
    evicted: tuple[Eviction, ...]
    room: ImportRoom


# The paste --------------------------------------------------------------------------

HTML_TAG = re.compile(
    r"<!doctype\b|<!--|</?(?:html|head|body|div|span|p|br|hr|ul|ol|li|dl|dt|dd|h[1-6]|a|b|i|u|em|strong|code"
    r"|pre|blockquote|table|thead|tbody|tr|td|th|img|script|style|iframe|form|input|button|svg|meta|link"
    r"|section|article|header|footer|nav|main)\b[^>]*>",
    re.IGNORECASE,
)
# Control characters a textarea can carry but no memory should (tabs and newlines stay).
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def import_text_clean(text: str) -> str:
    """The paste as it will be split, or ImportRefused saying why it cannot be: nothing in
    it, more than IMPORT_MAX_CHARS characters, or HTML (which is never rendered, and would
    be split into tags rather than facts)."""
    text = CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n")).strip()
    if not text:
        raise ImportRefused(EMPTY)
    if len(text) > IMPORT_MAX_CHARS:
        raise ImportRefused(too_long_message(len(text)))
    if tag := HTML_TAG.search(text):
        raise ImportRefused(
            f"This has HTML in it ({tag.group(0)[:40]}), so it is a web page's code rather than the "
            "assistant's answer. Copy the answer as the assistant shows it (its Copy button gives plain "
            "text), or take the tags out."
        )
    return text


def too_long_message(length: int) -> str:
    return (
        f"That is {length:,} characters; an import takes at most {IMPORT_MAX_CHARS:,} at a time. "
        "Paste the first part now, save it, then import the rest."
    )


# Splitting ----------------------------------------------------------------------------


def import_split(*, user: User, text: str) -> ImportSplit:
    """The proposals in a pasted answer, for the person to review; nothing is saved.

    The model splits it, part by part; a part whose answer is unusable is split line by
    line instead. ImportRefused when the paste cannot be used, has no fact in it, or has
    more than IMPORT_MAX_FACTS."""
    text = import_text_clean(text)
    by_lines = split_lines(text)
    if len(by_lines.proposals) > IMPORT_MAX_FACTS:
        raise ImportRefused(_too_many_message(len(by_lines.proposals)))
    proposals, by_model = _split_by_model(text)
    if not proposals:
        raise ImportRefused(NO_FACTS)
    if len(proposals) > IMPORT_MAX_FACTS:
        raise ImportRefused(_too_many_message(len(proposals)))
    known = {_comparable(said) for m in memory_list_for_user(user=user) for said in (m.summary, m.content)}
    proposals = [replace(p, known=_comparable(p.summary) in known) for p in proposals]
    return ImportSplit(
        proposals=tuple(proposals),
        by_model=by_model,
        from_prose=by_lines.from_prose,
        room=import_room_for_user(user=user),
    )


def _too_many_message(count: int) -> str:
    return (
        f"That is {count} facts; an import takes at most {IMPORT_MAX_FACTS} at a time. "
        "Paste the first part now, save it, then import the rest."
    )


@dataclass(frozen=True)
class LineSplit:
    proposals: tuple[Proposal, ...]
    # How many list items (bullets, numbers) the paste had: the model must not lose them.
    items: int
    # No list, no line per fact: each sentence was proposed on its own.
    from_prose: bool


def split_lines(text: str) -> LineSplit:
    """The paste split without the model (`paste_splitter`): one proposal per bullet,
    numbered item or line, a line of several sentences one per sentence; lines indented
    under a bullet are its details; a heading hints at the category of what follows; the
    assistant's own remarks (a question, "Here's what I know:", "Let me know...") are left
    out."""
    split = split_paste(text, summary_max_chars=SUMMARY_MAX_CHARS)
    proposals = tuple(
        Proposal(summary=fact.summary, details=fact.details, category=fact.category, tier=fact.tier)
        for fact in split.facts
    )
    return LineSplit(proposals=proposals, items=split.list_items, from_prose=split.from_prose)


def _comparable(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(".!;, ")


# The model's split --------------------------------------------------------------------


class _Unusable(Exception):
    """The model's answer cannot be used as it is; the message names why, never the text."""


def _split_by_model(text: str) -> tuple[list[Proposal], bool]:
    """The model's proposals, part by part; each part whose answer is unusable is split
    line by line instead. True when the model split all of it."""
    proposals: list[Proposal] = []
    by_model = True
    model_reachable = True
    for chunk in model_chunks(text, size=MODEL_CHUNK_LINES):
        lines = split_lines(chunk)
        if model_reachable:
            try:
                proposals.extend(_model_proposals(chunk, expected_items=lines.items))
                continue
            except llm.LLMError as error:
                # The model is down or slow: the rest is split here, without waiting on it again.
                model_reachable = False
                logger.warning("memory import: the model could not split a paste (retryable=%s)", error.retryable)
            except _Unusable as unusable:
                logger.info("memory import: the model's split was unusable (%s); split line by line", unusable)
        by_model = False
        proposals.extend(lines.proposals)
    return proposals, by_model


def model_chunks(text: str, *, size: int = MODEL_CHUNK_LINES) -> Iterator[str]:
    """The paste in parts of at most `size` lines that say something (more only to finish
    an item), each cut before a line that starts a new item, each after the first led by
    the heading it falls under."""
    current: list[str] = []
    counted = 0
    under = ""
    for line in text.splitlines():
        if not line.strip():
            current.append(line)
            continue
        is_heading = heading(line.strip()) is not None and not is_chatter(plain(line))
        if counted >= size and not line[:1].isspace():
            yield "\n".join(current).strip()
            current = [under] if under and not is_heading else []
            counted = len(current)
        if is_heading:
            under = line.strip()
        current.append(line)
        counted += 1
    if counted:
        yield "\n".join(current).strip()


def _model_proposals(chunk: str, *, expected_items: int) -> list[Proposal]:
    instructions = f"{prompt('memory', 'memory_import')}\n\nCategories: {', '.join(IMPORT_CATEGORIES)}."
    answer = llm.complete([{"role": "system", "content": instructions}, {"role": "user", "content": chunk}])
    facts = _facts_of(answer)
    if not facts:
        raise _Unusable("no facts")
    # A list of ten items answered with three facts lost some: a fact may take in the
    # lines under it, but not half the list.
    if expected_items >= 3 and len(facts) * 2 < expected_items:
        raise _Unusable(f"{len(facts)} facts for {expected_items} list items")
    now = timezone.now()
    return [_checked(fact, now=now) for fact in facts]


def _facts_of(answer: str) -> list[Any]:
    """The facts of the model's answer: {"facts": [...]} or a bare list, in a code fence or not."""
    text = re.sub(r"^```[a-z]*\s*|\s*```$", "", answer.strip(), flags=re.IGNORECASE)
    starts = [index for index in (text.find("{"), text.find("[")) if index >= 0]
    if not starts:
        raise _Unusable("no JSON")
    try:
        data, _ = json.JSONDecoder().raw_decode(text[min(starts) :])
    except ValueError:
        raise _Unusable("invalid JSON") from None
    facts = data.get("facts") if isinstance(data, dict) else data
    if not isinstance(facts, list):
        raise _Unusable("no list of facts")
    return facts


def _checked(fact: Any, *, now: datetime) -> Proposal:
    """One fact of the model's answer as a proposal, every field checked as a memory's."""
    if not isinstance(fact, dict):
        raise _Unusable("a fact that is not an object")
    summary, details = fact.get("summary"), fact.get("details", fact.get("content")) or ""
    category, tier = fact.get("category") or Category.OTHER, fact.get("tier") or Tier.PROFILE
    if not all(isinstance(value, str) for value in (summary, details, category, tier)):
        raise _Unusable("a field that is not text")
    if HTML_TAG.search(f"{summary} {details}"):
        raise _Unusable("markup in a fact")
    summary, details = " ".join(summary.split()), details.strip()
    if len(summary) > SUMMARY_MAX_CHARS:
        # Too long for a summary, but the words are the fact: they go to the details.
        details = f"{summary}\n{details}" if details else summary
        summary = clip(summary, SUMMARY_MAX_CHARS)
    category, tier = category.strip().lower(), tier.strip().lower()
    if category not in IMPORT_CATEGORIES:
        raise _Unusable("a category no memory has")
    if tier not in Tier.values:
        raise _Unusable("a tier no memory has")
    draft = MemoryDraft(key="import-1", tier=tier, category=category, summary=summary, content=details)
    try:
        validate_draft(draft, now=now)
    except MemoryInvalid as invalid:
        raise _Unusable(f"a fact no memory may be ({', '.join(invalid.errors)})") from None
    return Proposal(summary=summary, details=details if details != summary else "", category=category, tier=tier)


# The ceiling ----------------------------------------------------------------------------


def import_room_for_user(*, user: User) -> ImportRoom:
    """How full the person's store is, as the ceiling counts it."""
    notes = [facts for facts in memory_facts_for_user(user=user) if facts.category != EPISODE]
    return ImportRoom(
        stored=len(notes), kept=sum(1 for facts in notes if is_protected(facts)), ceiling=settings.MEMORY_MAX_STORED
    )


# Saving -------------------------------------------------------------------------------


def memories_import(*, user: User, proposals: Sequence[Proposal], now: datetime | None = None) -> ImportOutcome:
    """Save the proposals the person ticked (as they edited them) as their own memories.

    Every one is checked first (ImportInvalid names each problem; then nothing is saved),
    all are embedded in one call before any transaction, and all are saved in one, each
    under a neutral key with a `created` event. They are the person's, so never refused
    for space: the eviction policy makes room by forgetting the coach's oldest notes, in
    that same transaction, and what is kept for good may pass the ceiling.
    """
    now = now or timezone.now()
    drafts: list[MemoryDraft] = []
    errors: dict[int, dict[str, str]] = {}
    for index, proposal in enumerate(proposals):
        draft = MemoryDraft(
            key="import-1",
            tier=proposal.tier,
            category=proposal.category,
            summary=proposal.summary,
            content=proposal.details,
        )
        try:
            drafts.append(validate_draft(draft, now=now))
        except MemoryInvalid as invalid:
            errors[index] = {
                "details" if name == "content" else name: message for name, message in invalid.errors.items()
            }
        if proposal.category not in IMPORT_CATEGORIES:
            errors.setdefault(index, {})["category"] = f"must be one of {', '.join(IMPORT_CATEGORIES)}"
    if errors:
        raise ImportInvalid(errors)
    # One embedding call for all of them, made before any transaction opens.
    embeddings = llm.embed([memory_text(summary=d.summary, content=d.content) for d in drafts])
    saved: list[Memory] = []
    evicted: list[Eviction] = []
    with transaction.atomic():
        lock_user(user)
        taken = set(Memory.objects.filter(user=user).values_list("key", flat=True))
        for draft, embedding in zip(drafts, embeddings, strict=True):
            key = neutral_key(draft.category, taken)
            taken.add(key)
            outcome = memory_save(
                user=user,
                draft=replace(draft, key=key),
                source=Source.USER,
                actor=MemoryEvent.Actor.USER,
                reason=IMPORT_REASON,
                embedding=embedding,
                now=now,
            )
            saved.append(outcome.memory)
            evicted.extend(outcome.evicted)
        room = import_room_for_user(user=user)
    return ImportOutcome(saved=tuple(saved), evicted=tuple(evicted), room=room)
