"""Bringing in what another assistant knows about a person: its answer, pasted, split into
proposed memories the person reviews, then saved as their own.

The split is asked of the model first (a JSON answer for each part of the paste) and the
answer is checked like anything a client sends. Whatever it gets wrong (no JSON, the wrong
shape, nothing, a field no memory may have, facts left out, an error), that part of the
paste is split line by line here instead, so an import never depends on the model: one
fact per line or bullet, a heading ("## Health") as a hint of the category. Nothing is
stored between the paste and the save: the proposals travel in the review form, and only
what the person ticks becomes a memory.

Saved memories are the person's own (`user`): protected, neutrally named, and, like every
write of theirs, never refused for space (memory.policy, rule 4); the store's ceiling is
kept by forgetting the coach's oldest notes, in the same transaction.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
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
    from_prose: bool


BULLET = re.compile(
    r"^(?P<indent>[ \t]*)(?:[-*+\u2022\u2023\u2043\u2219\u25aa\u25cf\u25e6\u2013\u2014]|\(?\d{1,3}[.)]|\(?[a-z][.)])"
    r"\s+(?P<text>\S.*)$"
)
MARKDOWN_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(?P<text>.+?)\s*#*\s*$")
EMPHASIS_HEADING = re.compile(r"^(?:\*\*|__)(?P<text>[^*_]{1,80}?):?(?:\*\*|__):?$")
LABEL_HEADING = re.compile(r"^(?P<text>[^.!?:]{1,60}):$")
RULE = re.compile(r"^[-*_=\s]{3,}$")
# A date an export puts before each memory: "[2025-03-01] - ..." or "2025-03-01: ...".
LEADING_DATE = re.compile(r"^\[?(?:\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{2,4})\]?\s*(?:[-\u2013\u2014:|]\s*)?")
SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'\u201c(])")
# What an assistant says about itself around the list, rather than about the person.
CHATTER = re.compile(
    r"^(?:here(?:'s| is| are)\b|sure\b|certainly\b|of course\b|absolutely\b|ok(?:ay)?\b|great\b|"
    r"let me know\b|feel free\b|i hope\b|hope (?:this|that)\b|if you(?:'d| would)? (?:like|want)\b|"
    r"would you like\b|do you want\b|is there anything\b|(?:that|this)(?:'s| is) (?:all|everything|what)\b|"
    r"these are\b|below (?:is|are)\b|as an ai\b|"
    r"i (?:don'?t|do not|can'?t|cannot|haven'?t|have not|didn'?t|did not) (?:currently )?"
    r"(?:have|store|keep|retain|remember|access|save))",
    re.IGNORECASE,
)
MAX_HEADING_WORDS = 6
# An item this short says little without its heading: "Allergies:" then "- peanuts".
BARE_ITEM_WORDS = 2


@dataclass
class _Item:
    text: str
    hint: _Hint
    indent: int = 0
    details: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Hint:
    """What a heading says of the facts under it."""

    category: str | None = None
    tier: str | None = None
    # The heading's own words, to name what a bare item is ("Allergies: peanuts").
    label: str = ""


def split_lines(text: str) -> LineSplit:
    """The paste split without the model: one proposal per bullet, numbered item or line,
    a line of several sentences one per sentence; lines indented under a bullet are its
    details; a heading hints at the category of what follows; the assistant's own
    remarks (a question, "Here's what I know:", "Let me know...") are left out."""
    items: list[_Item] = []
    hint = _Hint()
    bullets = 0
    prose = False
    # Where the current section's items start, and the indent of a bullet heading
    # ("- Health:") whose section ends at the next line as far left as it.
    section_start, heading_indent = 0, None
    for raw in text.splitlines():
        if not raw.strip() or RULE.match(raw):
            continue
        bullet = BULLET.match(raw)
        indent = len((bullet.group("indent") if bullet else raw[: len(raw) - len(raw.lstrip())]).expandtabs(4))
        line = _plain(bullet.group("text") if bullet else raw)
        sentences = [line] if bullet else [s.strip() for s in SENTENCE_BREAK.split(line) if s.strip()]
        if not line or all(_is_chatter(sentence) for sentence in sentences):
            continue
        if heading_indent is not None and indent <= heading_indent:
            hint, section_start, heading_indent = _Hint(), len(items), None
        if (
            heading := _heading(bullet.group("text").strip() if bullet else raw.strip(), in_list=bool(bullet))
        ) is not None:
            hint, section_start = _hint_of(heading), len(items)
            heading_indent = indent if bullet else None
            continue
        parent = items[-1] if len(items) > section_start else None
        if parent is not None and indent > parent.indent:
            if not bullet and line[:1].islower():
                # A bullet's text wrapped onto the next line.
                parent.text = f"{parent.text} {line}"
            else:
                # Deeper lines say more about the bullet above: "- Training for a half
                # marathon" then "  - never raced past 10k".
                parent.details.append(line)
            continue
        if bullet:
            bullets += 1
            items.append(_Item(text=line, hint=hint, indent=indent))
            continue
        sentences = [sentence for sentence in sentences if not _is_chatter(sentence)]
        prose = prose or len(sentences) > 1
        items.extend(_Item(text=sentence, hint=hint, indent=indent) for sentence in sentences)
    proposals = tuple(_proposal(item) for item in items)
    return LineSplit(proposals=proposals, items=bullets, from_prose=prose and not bullets)


def _plain(text: str) -> str:
    """A line without its Markdown: emphasis, code ticks, quote marks, a leading date."""
    text = text.strip().lstrip(">").strip()
    text = re.sub(r"(\*\*|__)(.+?)\1", r"\2", text)
    text = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"\1", text)
    text = text.replace("`", "")
    return LEADING_DATE.sub("", text).strip()


def _is_chatter(line: str) -> bool:
    return line.rstrip().endswith("?") or bool(CHATTER.match(line.strip()))


def _heading(line: str, *, in_list: bool = False) -> str | None:
    """The words of a heading line ("## Health", "**Health**", "Health:"), else None. In a
    list only a label ending in a colon is one: "- **Allergic to peanuts**" is a fact."""
    if in_list and not line.rstrip("*_ ").endswith(":"):
        return None
    for pattern in (MARKDOWN_HEADING, EMPHASIS_HEADING, LABEL_HEADING):
        if match := pattern.match(line):
            words = _plain(match.group("text")).rstrip(":").strip()
            if len(words.split()) <= MAX_HEADING_WORDS or pattern is MARKDOWN_HEADING:
                return words
    return None


# What a heading's words say of the facts under it, the first match winning.
HEADING_HINTS: tuple[tuple[re.Pattern[str], _Hint], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), hint)
    for pattern, hint in (
        (r"allerg", _Hint(category=Category.ALLERGY)),
        (r"injur", _Hint(category=Category.INJURY)),
        (r"health|medical|condition|well-?being", _Hint(category=Category.MEDICAL)),
        (r"safety", _Hint(category=Category.SAFETY)),
        (r"constraint|limitation|restriction", _Hint(category=Category.CONSTRAINT)),
        (r"upcoming|coming up|\bplans?\b|\bevents?\b|reminder|deadline|future", _Hint(tier=Tier.PROSPECTIVE)),
        (r"goal|\baims?\b|aspiration|ambition", _Hint(category=Category.GOAL)),
        (r"schedule|availability|calendar|timetable", _Hint(category=Category.SCHEDULE)),
        (r"habit|routine", _Hint(category=Category.HABIT)),
        (r"instruction|feedback|coaching|respond|response|communicat|\btone\b", _Hint(category=Category.FEEDBACK)),
        (r"preference|\blikes\b|dislike|interest|hobb|favou?rite|\bstyle\b", _Hint(category=Category.PREFERENCE)),
        (r"project", _Hint(category=Category.PROJECT)),
        (r"\bwork|career|\bjob|background|about|personal|identity|\bbio|profile|family|\blife\b|who",
         _Hint(category=Category.BACKGROUND)),
        (r"reference|\blinks?\b|resource|\btools?\b", _Hint(category=Category.REFERENCE)),
    )
)  # fmt: skip


def _hint_of(heading: str) -> _Hint:
    """What a heading says of its facts. One naming two topics ("Routine and preferences")
    says nothing of each fact's category: their own words do."""
    hints = [hint for pattern, hint in HEADING_HINTS if pattern.search(heading)]
    categories = {hint.category for hint in hints if hint.category}
    tier = next((hint.tier for hint in hints if hint.tier), None)
    return _Hint(category=categories.pop() if len(categories) == 1 else None, tier=tier, label=heading)


# What a fact's own words say of its category: safety first, whatever the heading said.
SAFETY_WORDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (category, re.compile(pattern, re.IGNORECASE))
    for category, pattern in (
        (Category.ALLERGY, r"\ballerg|\banaphyla|\bepi-?pen|\bintoleran(?:t|ce)\b|\bc(?:o)?eliac"),
        (
            Category.INJURY,
            r"\binjur|\bsprain|\bstrained\b|\btorn\b|\bfractur|\bbroken\b|\bdislocat|\btendin|\bligament|\bacl\b"
            r"|\bmeniscus|\bsciatica|\bhernia"
            r"|\b(?:bad|sore|weak|dodgy|injured|stiff|painful) (?:left |right |lower |upper )?"
            r"(?:knee|back|shoulder|ankle|hip|wrist|elbow|neck|foot|hamstring|calf)",
        ),
        (
            Category.MEDICAL,
            r"\basthma|\bdiabet|\bblood pressure|\bhypertension|\bmedication|\bmedicine\b|\bdiagnos|\bpregnan"
            r"|\bmigraine|\bepilep|\bheart (?:condition|disease|problem)|\banxiety|\bdepress|\badhd\b|\binsulin"
            r"|\bthyroid|\barthritis|\bchronic\b|\bsurgery|\bdisorder\b|\bsyndrome",
        ),
    )
)
OTHER_WORDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (category, re.compile(pattern, re.IGNORECASE))
    for category, pattern in (
        (
            Category.GOAL,
            r"\bgoals?\b|\baim(?:s|ing)? (?:to|for)\b|\bwants? to\b|\bwould like to\b|\bhop(?:es|ing) to\b"
            r"|\btraining for\b|\bworking towards?\b|\bplans? to\b|\bdreams? of\b",
        ),
        (
            Category.BACKGROUND,
            r"\bname is\b|\b(?:you're|you are|i'm|i am) an? \w+"
            r"|\bworks? (?:as|at|in|for)\b|\bjob\b|\bcareer\b|\blives? in\b|\bborn\b|\byears old\b"
            r"|\bmarried\b|\bpartner\b|\bkids?\b|\bchildren\b|\bstudied\b|\bdegree\b|\bretired\b",
        ),
        (
            Category.SCHEDULE,
            r"\b(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b|\bweekdays?\b|\bweekends?\b|\bmornings?\b|\bevenings?\b"
            r"|\bafternoons?\b|\bevery day\b|\bdaily\b|\btimes? a week\b|\bschedule\b|\bshifts?\b"
            r"|\b\d{1,2}(?::\d{2})?\s?(?:am|pm)\b",
        ),
        (
            Category.PREFERENCE,
            r"\bprefers?\b|\blikes?\b|\bloves?\b|\benjoys?\b|\bdislikes?\b|\bhates?\b|\bfavou?rite\b",
        ),
        (Category.PROJECT, r"\bprojects?\b|\bbuilding (?:a|an)\b|\bwriting (?:a|an)\b|\bstartup\b|\bthesis\b"),
        (
            Category.HABIT,
            r"\busually\b|\broutine\b|\bhabit\b|\btends? to\b|\boften\b|\bdrinks?\b|\beats?\b|\bsleeps?\b",
        ),
        (Category.REFERENCE, r"https?://|\bwww\."),
    )
)
PROSPECTIVE_WORDS = re.compile(r"\bupcoming\b|\bcoming up\b|\bdeadline\b|\bdue (?:on|in|by)\b", re.IGNORECASE)


def guess_category(text: str, *, hint: str | None = None) -> str:
    """A fact's category from its words: a safety word wins over a heading's hint, which
    wins over the other words; `other` when nothing says."""
    for category, words in SAFETY_WORDS:
        if words.search(text):
            return category
    if hint:
        return hint
    return next((category for category, words in OTHER_WORDS if words.search(text)), Category.OTHER)


def _proposal(item: _Item) -> Proposal:
    text = " ".join(item.text.split())
    label = item.hint.label
    if len(text.split()) <= BARE_ITEM_WORDS and label and ":" not in text and label.casefold() not in text.casefold():
        text = f"{label}: {text}"
    details = "\n".join(item.details)
    if len(text) > SUMMARY_MAX_CHARS:
        details = "\n".join(part for part in (text, details) if part)
        text = clip(SENTENCE_BREAK.split(text, maxsplit=1)[0])
    tier = item.hint.tier or (Tier.PROSPECTIVE if PROSPECTIVE_WORDS.search(text) else Tier.PROFILE)
    category = guess_category(f"{text} {details}", hint=item.hint.category)
    return Proposal(summary=text, details=details, category=category, tier=tier)


def clip(text: str, limit: int = SUMMARY_MAX_CHARS) -> str:
    """`text` in at most `limit` characters, cut at a word with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return text[: limit - 1].rsplit(" ", 1)[0].rstrip(",;:") + "\u2026"


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
    heading = ""
    for line in text.splitlines():
        if not line.strip():
            current.append(line)
            continue
        is_heading = _heading(line.strip()) is not None and not _is_chatter(_plain(line))
        if counted >= size and not line[:1].isspace():
            yield "\n".join(current).strip()
            current = [heading] if heading and not is_heading else []
            counted = len(current)
        if is_heading:
            heading = line.strip()
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
        summary = clip(summary)
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
