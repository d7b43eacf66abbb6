"""Small pieces of English the offline coach writes with: person, sentences, slugs, length.

Rules of thumb, not grammar: enough to turn "I train on Mondays" into "Trains on Mondays"
and "their left shoulder" into "your left shoulder" for the sentences this coach writes.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Sequence

SUMMARY_MAX_CHARS = 150
KEY_MAX_CHARS = 64

SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\n+")
# Where a sentence starts a new statement about the speaker: "..., and I'm allergic to ...".
# "... and I can't ..." goes on about the same thing, so it does not break.
STATEMENT_BREAK = re.compile(
    r";\s*|,?\s+(?:and|but|also|plus)\s+(?=(?:i|i'm|i've|i'd|my)\b)"
    r"(?!i (?:can't|cannot|can not|shouldn't|should not|mustn't|must not|avoid)\b|i(?:'m| am) not allowed)",
    re.IGNORECASE,
)
LEADING_FILLER = re.compile(r"^(?:(?:also|and|but|so|plus|oh|btw|anyway|well|actually|ok|okay),?\s+)+", re.IGNORECASE)
CLAUSE_END = re.compile(r"[,.;:!?]|\s(?:but|so|because|although|though|which|and i|and my)\s", re.IGNORECASE)

_SECOND_PERSON = {
    "they're": "you're",
    "they've": "you've",
    "they'd": "you'd",
    "they'll": "you'll",
    "they": "you",
    "them": "you",
    "their": "your",
    "theirs": "yours",
    "themselves": "yourself",
    # What the person said of a group they are in: "we rehearse" is theirs too.
    "we": "you",
    "our": "your",
}
_ADVERBS = frozenset({"never", "always", "only", "also", "still", "often", "sometimes", "usually", "normally", "just"})
_PAST = frozenset({"had", "did", "was", "went", "got", "made", "took", "broke", "tore", "ran", "swam", "began"})
_IRREGULAR = {"have": "has", "do": "does", "go": "goes", "be": "is"}
# Verbs a third-person summary may open with, so "Trains on Mondays" can become
# "you train on Mondays" without mistaking "Knees ache" for a verb.
KNOWN_VERBS = frozenset(
    """
    train run work lift swim cycle ride walk play practise practice exercise study write sleep wake
    start finish eat drink cook travel commute teach coach climb row box dance stretch prefer like
    love hate want need avoid keep use take go do have
    """.split()  # noqa: SIM905 - a word list reads best as words
)


def normalise(text: str) -> str:
    """Straight apostrophes and single spaces, so patterns see one spelling."""
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    return re.sub(r"[ \t]+", " ", text).strip()


def sentences(text: str) -> list[str]:
    """`text` split into sentences (at . ! ? and line breaks), stripped, empty ones dropped."""
    return [part.strip() for part in SENTENCE_BREAK.split(normalise(text)) if part.strip()]


def statements(text: str) -> list[str]:
    """`text` split into sentences, and sentences where a new "I ..." begins, without fillers."""
    pieces = [piece for sentence in sentences(text) for piece in STATEMENT_BREAK.split(sentence)]
    return [capitalise(LEADING_FILLER.sub("", piece).strip()) for piece in pieces if piece.strip()]


def first_sentence(text: str) -> str:
    """The first sentence of `text`, or "" for blank text."""
    found = sentences(text)
    return found[0] if found else ""


def clause_end(text: str, start: int) -> int:
    """Where the clause that runs from `start` ends: at punctuation or a joining word."""
    found = CLAUSE_END.search(text, start)
    return found.start() if found else len(text)


def swap_person(text: str, table: dict[str, str]) -> str:
    """Replace whole words (and "i am" pairs) by `table`, keeping a capital first letter."""
    pattern = "|".join(sorted((re.escape(word) for word in table), key=len, reverse=True))

    def replace(match: re.Match[str]) -> str:
        word = match.group(0)
        swapped = table[word.lower()]
        # "I" is always a capital, so only other words carry their capital over.
        is_first_person = word.lower() == "i" or word.lower().startswith(("i ", "i'"))
        return swapped[0].upper() + swapped[1:] if word[0].isupper() and not is_first_person else swapped

    return re.sub(rf"(?<![\w'])(?:{pattern})(?![\w'])", replace, normalise(text), flags=re.IGNORECASE)


def second_person_words(text: str) -> str:
    """`text` about "they" rewritten to address the reader: "their knee" -> "your knee"."""
    return swap_person(text, _SECOND_PERSON)


def conjugate(verb: str) -> str:
    """The third-person singular of a base verb: train -> trains, finish -> finishes."""
    lower = verb.lower()
    if lower.endswith("ed") or lower in _PAST:
        # Already past: "I had my hip replaced" is "Had their hip replaced".
        return verb
    if lower in _IRREGULAR:
        return _IRREGULAR[lower]
    if lower.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(lower) > 1 and lower.endswith("y") and lower[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def addressed_to_reader(summary: str) -> str | None:
    """A third-person summary opening with a verb, addressed to the reader; None if it has none.

    "Doesn't eat meat" -> "you don't eat meat"; "Trains on Mondays" -> "you train on
    Mondays"; "Giving a talk in June" -> "you're giving a talk in June".
    """
    text = second_person_words(normalise(summary).rstrip(" ."))
    head, _, rest = text.partition(" ")
    lower = head.lower()
    fixed = {
        "doesn't": "you don't",
        "does": "you do",
        "has": "you have",
        "had": "you had",
        "is": "you're",
        "was": "you were",
        "didn't": "you didn't",
    }
    if lower in fixed:
        return f"{fixed[lower]} {rest}".strip()
    if lower in {"can", "can't", "cannot", "will", "won't"}:
        return f"you {lower} {rest}".strip()
    if lower.endswith("ing") and len(lower) > 4:
        return f"you're {lower} {rest}".strip()
    adverbs: list[str] = []
    words = text.split(" ")
    while words and words[0].lower() in _ADVERBS:
        adverbs.append(words.pop(0).lower())
    if words and (base := _base_verb(words[0])):
        return " ".join(["you", *adverbs, base, *words[1:]])
    return None


def lower_first(text: str) -> str:
    """`text` with its first letter lowercased, unless it starts an acronym or "I"."""
    if (len(text) > 1 and text[1].isupper()) or text.startswith(("I ", "I'")):
        return text
    return text[:1].lower() + text[1:]


def capitalise(text: str) -> str:
    """`text` with its first letter uppercased and the rest left alone."""
    return text[:1].upper() + text[1:]


def as_sentence(text: str) -> str:
    """`text` capitalised and ending in one full stop (or its own ! or ?)."""
    text = capitalise(text.strip().rstrip(",;:"))
    return text if text.endswith((".", "!", "?")) else text + "."


def clip(text: str, limit: int = SUMMARY_MAX_CHARS) -> str:
    """`text` on one line and at most `limit` characters, cut at a word with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + "\u2026"


def slug(words: Iterable[str], limit: int = KEY_MAX_CHARS) -> str:
    """A lowercase ASCII key of `words` joined by hyphens, at most `limit` characters."""
    ascii_text = unicodedata.normalize("NFKD", " ".join(words)).encode("ascii", "ignore").decode()
    parts = [part for part in re.split(r"[^a-z0-9]+", ascii_text.lower()) if part]
    key = ""
    for part in parts:
        candidate = f"{key}-{part}" if key else part
        if len(candidate) > limit:
            break
        key = candidate
    return key or "note"


def join_words(items: Sequence[str]) -> str:
    """ "a", "a and b", "a, b and c"; each once, however often it was given."""
    items = list(dict.fromkeys(items))
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def pick(options: Sequence[str], *seeds: object) -> str:
    """One of `options`, chosen by a stable hash of `seeds`: variety without randomness."""
    return options[stable_number(*seeds) % len(options)]


def stable_number(*seeds: object) -> int:
    """A number of `seeds` that is the same in every process: variety without randomness."""
    # hashlib, not hash(): Python salts str hashes per process.
    digest = hashlib.blake2b("\x1f".join(map(str, seeds)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def _base_verb(word: str) -> str | None:
    lower = word.lower()
    for base, third in _IRREGULAR.items():
        if lower == third:
            return base
    for candidate in (lower[:-3] + "y" if lower.endswith("ies") else "", lower[:-2], lower[:-1]):
        if candidate in KNOWN_VERBS and conjugate(candidate) == lower:
            return candidate
    return None
