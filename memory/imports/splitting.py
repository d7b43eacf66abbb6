"""A pasted answer split into proposals: cleaned, then split by the model part by part,
and line by line (`paste_splitter`, the splitter the offline coach answers with too)
wherever the model's answer is unusable, so an import never depends on the model.

The model's answer is checked like anything a client sends. Where it is unusable (no
JSON, the wrong shape, nothing, a field no memory may have, facts left out), that part is
split line by line instead; once the model cannot be reached, so is the rest.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.utils import timezone

from infra import llm
from infra.prompts import prompt
from memory.drafts import MemoryDraft, MemoryInvalid, category_from_words, validate_draft
from memory.models import SUMMARY_MAX_CHARS, Category, Tier
from paste_splitter import clip, heading, is_chatter, plain, split_paste

logger = logging.getLogger(__name__)

# A memory list is a few thousand characters; this is several times that. Kept below
# REQUEST_BODY_MAX_BYTES (512 KiB): the review form sends the paste back beside the
# proposals made of it, so a body holds it about twice, and a character can take 12 bytes
# in a form body (4 in UTF-8, each percent-encoded): 480,000 at most.
IMPORT_MAX_CHARS = 20_000
# Lines of the paste the model is given at once: its answer must fit COACH_MAX_TOKENS.
MODEL_CHUNK_LINES = 40
# Weekly episodes are the coach's summaries of a week, not facts someone else knew.
IMPORT_CATEGORIES = tuple(value for value in Category.values if value != Category.EPISODE)

EMPTY = "Paste the other assistant's answer into the box first: it is empty."


class ImportRefused(Exception):
    """A paste that cannot be split into proposals; the message is for the person."""


class Mark(StrEnum):
    """What a proposal is beside what the person keeps and the rest of the paste."""

    NEW = ""
    # Reads like a memory they keep (`kept`): offered unticked, with that memory shown.
    KNOWN = "known"
    # Says otherwise than a memory they keep (`kept`): both shown, the person chooses
    # which stands (the one kept, this one in its place, or both).
    DIFFERS = "differs"
    # Reads like an earlier proposal of the same paste (`earlier`): offered unticked.
    REPEATS = "repeats"
    # Says otherwise than an earlier proposal (`earlier`): offered unticked, to tick the true one.
    DIFFERS_EARLIER = "differs-earlier"


@dataclass(frozen=True)
class Proposal:
    """One fact as proposed for the person to keep, edit or drop."""

    summary: str
    details: str = ""
    category: str = Category.OTHER
    tier: str = Tier.PROFILE
    mark: Mark = Mark.NEW
    # The id of the person's memory it reads like or says otherwise than, and its version
    # as the review showed it; the place in the list of the earlier proposal it repeats.
    kept: int | None = None
    kept_version: int | None = None
    earlier: int | None = None
    # What it says otherwise ("the month", "your work"), for a DIFFERS mark.
    differs_in: str = ""
    # On saving: the person chose this to stand in place of their memory `kept`.
    replaces: bool = False

    @property
    def offered_ticked(self) -> bool:
        return self.mark in (Mark.NEW, Mark.DIFFERS)


@dataclass(frozen=True)
class SkippedLine:
    """A line of the paste that could not be imported, left out of the proposals: its
    number as the person's text box counts lines, its start, and why."""

    number: int
    starts: str
    why: str


@dataclass(frozen=True)
class CleanPaste:
    # The paste as it is split: every line there, those that cannot be imported blanked
    # (so a line keeps its number).
    text: str
    skipped: tuple[SkippedLine, ...]


# The paste --------------------------------------------------------------------------

HTML_TAG = re.compile(
    r"<!doctype\b|<!--|</?(?:html|head|body|div|span|p|br|hr|ul|ol|li|dl|dt|dd|h[1-6]|a|b|i|u|em|strong|code"
    r"|pre|blockquote|table|thead|tbody|tr|td|th|img|script|style|iframe|form|input|button|svg|meta|link"
    r"|section|article|header|footer|nav|main)\b[^>]*>",
    re.IGNORECASE,
)
# A tag on a line of its own, closed there or not ("<div class=" wraps onto the next line).
HTML_LINE = re.compile(
    r"<!doctype\b|<!--|-->|</?(?:html|head|body|div|span|p|br|hr|ul|ol|li|dl|dt|dd|h[1-6]|a|b|i|u|em|strong|code"
    r"|pre|blockquote|table|thead|tbody|tr|td|th|img|script|style|iframe|form|input|button|svg|meta|link"
    r"|section|article|header|footer|nav|main)(?=[\s/>]|$)",
    re.IGNORECASE,
)
# How much of a skipped line is shown, to find it by.
STARTS_CHARS = 60
# Control characters a textarea can carry but no memory should (tabs and newlines stay).
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def import_text_clean(text: str) -> str:
    """The paste with its line breaks made plain and control characters taken out, or
    ImportRefused saying why none of it can be imported: nothing in it, or more than
    IMPORT_MAX_CHARS characters. A line that cannot be imported is not a reason to refuse the
    rest: paste_lines_checked leaves it out and names it."""
    text = CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n")).strip()
    if not text:
        raise ImportRefused(EMPTY)
    if len(text) > IMPORT_MAX_CHARS:
        raise ImportRefused(too_long_message(len(text)))
    return text


def paste_lines_checked(text: str) -> CleanPaste:
    """The cleaned paste with each line that cannot be imported blanked and named: a line of
    HTML (a web page's code, never rendered, which would be split into tags rather than
    facts), or one longer than a memory's whole note. ImportRefused when no line is left."""
    lines = text.split("\n")
    skipped = []
    for index, line in enumerate(lines):
        why = _why_not_importable(line)
        if why:
            skipped.append(SkippedLine(number=index + 1, starts=clip(line.strip(), STARTS_CHARS), why=why))
            lines[index] = ""
    if skipped and not any(line.strip() for line in lines):
        raise ImportRefused(
            "Every line of this has HTML in it, so it is a web page's code rather than the assistant's answer. "
            "Copy the answer as the assistant shows it (its Copy button gives plain text), or take the tags out."
            if all(line.why.startswith("it has HTML") for line in skipped)
            else "None of its lines can be imported: " + "; ".join(f"line {s.number}: {s.why}" for s in skipped)
        )
    return CleanPaste(text="\n".join(lines), skipped=tuple(skipped))


def _why_not_importable(line: str) -> str:
    if tag := HTML_LINE.search(line):
        return f"it has HTML in it ({tag.group(0).strip()}…), so it reads as a web page's code, not a fact"
    if len(line.strip()) > settings.MEMORY_CONTENT_MAX_CHARS:
        return (
            f"it is {len(line.strip()):,} characters long, more than one memory holds "
            f"({settings.MEMORY_CONTENT_MAX_CHARS:,})"
        )
    return ""


def too_long_message(length: int) -> str:
    return (
        f"That is {length:,} characters; an import takes at most {IMPORT_MAX_CHARS:,} at a time. "
        "Paste the first part now, save it, then import the rest."
    )


# Line by line -------------------------------------------------------------------------


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


# By the model -------------------------------------------------------------------------


class _Unusable(Exception):
    """The model's answer cannot be used as it is; the message names why, never the text."""


def split_by_model(text: str) -> tuple[list[Proposal], bool]:
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
    # One isinstance per name, so the type checker knows each is text from here on.
    if not (
        isinstance(summary, str) and isinstance(details, str) and isinstance(category, str) and isinstance(tier, str)
    ):
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
    # Filed as the memory page files what a person writes: safety only on safety words,
    # the model's topic otherwise.
    category = category_from_words(f"{summary} {details}", suggested=category)
    draft = MemoryDraft(key="import-1", tier=tier, category=category, summary=summary, content=details)
    try:
        validate_draft(draft, now=now)
    except MemoryInvalid as invalid:
        raise _Unusable(f"a fact no memory may be ({', '.join(invalid.errors)})") from None
    return Proposal(summary=summary, details=details if details != summary else "", category=category, tier=tier)
