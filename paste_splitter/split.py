"""A paste split into facts, the way another assistant writes its memory list: one fact per
bullet, numbered item or line, a line of several sentences one per sentence; lines
indented under a bullet are its details; a heading hints at the category of what follows;
the assistant's own remarks are left out."""

from __future__ import annotations

from dataclasses import dataclass, field

from paste_splitter.categories import Heading, guess_category, guess_tier, heading_of
from paste_splitter.lines import BULLET, RULE, SENTENCE_BREAK, heading, is_chatter, plain, sentences

# An item this short says little without its heading: "Allergies:" then "- peanuts".
BARE_ITEM_WORDS = 2


@dataclass(frozen=True)
class PastedFact:
    """One fact of the paste, as a memory would hold it."""

    summary: str
    details: str
    category: str
    tier: str
    # The heading it fell under, for a reader that weighs its own knowledge against it.
    heading: Heading


@dataclass(frozen=True)
class PasteSplit:
    facts: tuple[PastedFact, ...]
    # How many list items (bullets, numbers) the paste had: a split must not lose them.
    list_items: int
    # No list, no line per fact: each sentence was taken on its own.
    from_prose: bool


@dataclass
class _Item:
    text: str
    heading: Heading
    indent: int = 0
    details: list[str] = field(default_factory=list)


def split_paste(text: str, *, summary_max_chars: int) -> PasteSplit:
    """The facts in `text`, each summary at most `summary_max_chars` characters (a longer
    fact keeps every word in its details)."""
    items: list[_Item] = []
    under = Heading()
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
        line = plain(bullet.group("text") if bullet else raw)
        said = [line] if bullet else sentences(line)
        if not line or all(is_chatter(sentence) for sentence in said):
            continue
        if heading_indent is not None and indent <= heading_indent:
            under, section_start, heading_indent = Heading(), len(items), None
        words = heading(bullet.group("text").strip() if bullet else raw.strip(), in_list=bool(bullet))
        if words is not None:
            under, section_start = heading_of(words), len(items)
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
            items.append(_Item(text=line, heading=under, indent=indent))
            continue
        said = [sentence for sentence in said if not is_chatter(sentence)]
        prose = prose or len(said) > 1
        items.extend(_Item(text=sentence, heading=under, indent=indent) for sentence in said)
    facts = tuple(_fact(item, summary_max_chars=summary_max_chars) for item in items)
    return PasteSplit(facts=facts, list_items=bullets, from_prose=prose and not bullets)


def _fact(item: _Item, *, summary_max_chars: int) -> PastedFact:
    text = " ".join(item.text.split())
    label = item.heading.label
    if len(text.split()) <= BARE_ITEM_WORDS and label and ":" not in text and label.casefold() not in text.casefold():
        text = f"{label}: {text}"
    details = "\n".join(item.details)
    if len(text) > summary_max_chars:
        # Too long for a summary: its first sentence is, and every word goes to the details.
        details = "\n".join(part for part in (text, details) if part)
        text = clip(SENTENCE_BREAK.split(text, maxsplit=1)[0], summary_max_chars)
    return PastedFact(
        summary=text,
        details=details,
        category=guess_category(f"{text} {details}", heading=item.heading),
        tier=guess_tier(text, heading=item.heading),
        heading=item.heading,
    )


def clip(text: str, limit: int) -> str:
    """`text` in at most `limit` characters, cut at a word with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return text[: limit - 1].rsplit(" ", 1)[0].rstrip(",;:") + "\u2026"
