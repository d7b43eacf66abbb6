"""Words a row can be found by, without its words at rest: each kept as a keyed hash.

A row's text is lower-cased, split into words, stripped of stop words and stemmed here, in
the app ("pressing", "pressed", "presses" become one word); each word is then replaced by
an HMAC-SHA256 of the person's id and the word under FIELD_LOOKUP_KEY, cut to 16 hex
characters, and the hashes go into a PostgreSQL `tsvector` with their positions, which a
GIN index serves. A query is hashed the same way, so search runs in SQL, ranked by how many
of the query's words a row holds and how rare each is among the person's rows.

What the hashes reveal to someone holding the database without the key (SECURITY.md):
which of one person's rows share a word, and how often a word recurs in them; never the
word. The person's id is in every hash, so the same word is a different hash for each
person: nothing can be matched across people, and a word's frequency across everyone is
not there to count. Changing FIELD_LOOKUP_KEY means hashing again (rotate_encryption_keys).

Scripts without spaces between words (Chinese, Japanese, Korean) are split into pairs of
characters, the usual way to index them; other letters and digits of any script are words
as they stand.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from django.contrib.postgres.search import SearchVectorField

from infra.encryption import lookup_key

HASH_CHARS = 16
# A tsvector keeps positions up to 16,383; past that, words still count, at the last position.
MAX_POSITION = 16383
# The most distinct words a query is searched by: a 300-character query has fewer.
QUERY_MAX_WORDS = 48

STOP_WORDS = frozenset(
    """
    a an the and or but if then so of to in on at by for with from as into onto about over
    under up down out off again further once i me my mine myself you your yours yourself we
    our ours us they them their theirs he him his she her hers it its itself this that these
    those there here is am are was were be been being do does did doing have has had having
    will would shall should can could may might must just very really quite also too than
    what which who whom whose when where why how all any some each every such only own same
    not no nor s t d ll m re ve don doesn didn isn aren wasn weren won wouldn couldn
    shouldn hasn haven hadn im ive id youre its lets get got go going went gone
    """.split()  # noqa: SIM905 - a word list reads best as words
)

# [^\W_] is \w without the underscore: letters and digits of any script ("Rönnells", "5k").
WORD = re.compile(r"[^\W_]+")
# Han, kana and hangul: written without spaces, indexed as pairs of characters.
UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
# Apostrophes inside words ("don't", "Caroline's") join, rather than split, them.
APOSTROPHE = re.compile(r"(?<=[^\W_])['\u2019](?=[^\W_])")
MIN_STEM_LETTERS = 3
# English suffixes are stripped from words of Latin letters alone ("Rönnells" too).
LATIN = re.compile(r"[a-z\u00df-\u00ff\u0100-\u024f]+")


if TYPE_CHECKING:
    _SearchVectorField = SearchVectorField[Any, Any]
else:
    _SearchVectorField = SearchVectorField


def words(text: str) -> list[str]:
    """The words `text` is found by, in order: lower-cased, stemmed, stop words left out."""
    return [word for word, _ in words_as_written(text)]


def words_as_written(text: str) -> list[tuple[str, str]]:
    """Each word of `words(text)` with the form it was written in (lower-cased): what a
    match is told back as ("reading", not "read")."""
    found: list[tuple[str, str]] = []
    for token in WORD.findall(APOSTROPHE.sub("", text.casefold())):
        if UNSPACED.search(token):
            found += [(part, part) for part in _unspaced(token)]
        elif token not in STOP_WORDS:
            found.append((stem(token), token))
    return found


def _unspaced(token: str) -> list[str]:
    """A run of letters with unspaced script in it: each such run as its pairs of
    characters (a lone character as itself), the rest as words."""
    parts: list[str] = []
    at = 0
    for run in UNSPACED.finditer(token):
        if run.start() > at:
            parts.append(stem(token[at : run.start()]))
        chars = run.group(0)
        parts += [chars] if len(chars) == 1 else [chars[i : i + 2] for i in range(len(chars) - 1)]
        at = run.end()
    if at < len(token):
        parts.append(stem(token[at:]))
    return [part for part in parts if part and part not in STOP_WORDS]


def stem(word: str) -> str:
    """English inflections stripped from longer words: "hangs", "hanging" and "hanged" are
    "hang"; "injuries" and "injury" are "injury"; "pressing" stays "press". Light on
    purpose: it never merges two words a person would call different."""
    if len(word) <= 3 or not LATIN.fullmatch(word):
        return word
    if word.endswith("'s"):
        word = word[:-2]
    for suffix, replacement in (("ies", "y"), ("ied", "y")):
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            return word[: -len(suffix)] + replacement
    for suffix in ("ing", "ed", "es", "s"):
        if not word.endswith(suffix):
            continue
        root = word[: -len(suffix)]
        if suffix == "es" and not root.endswith(("ss", "sh", "ch", "x", "z")):
            continue
        if suffix == "s" and word.endswith(("ss", "us", "is")):
            return word
        if len(root) < MIN_STEM_LETTERS:
            return word
        if suffix in ("ing", "ed") and len(root) > MIN_STEM_LETTERS and root[-1] == root[-2] and root[-1] not in "lsz":
            root = root[:-1]  # running -> run, stopped -> stop; pressing -> press
        return root
    return word


def word_hash(user_id: int, word: str) -> str:
    """The keyed hash one person's `word` is stored and searched as: 16 hex characters."""
    message = f"words:{user_id}:{word}".encode()
    return hmac.new(lookup_key(), message, hashlib.sha256).hexdigest()[:HASH_CHARS]


def hashed_words(user_id: int, text: str) -> str:
    """`text` as a tsvector of its words' hashes with their positions (PostgreSQL's text
    form, which the column reads): what is stored for a row. Empty for no words."""
    positions: dict[str, list[int]] = {}
    for position, word in enumerate(words(text), start=1):
        positions.setdefault(word_hash(user_id, word), []).append(min(position, MAX_POSITION))
    return " ".join(f"{digest}:{','.join(map(str, at[:256]))}" for digest, at in positions.items())


def query_words(user_id: int, text: str, *, most: int | None = None) -> dict[str, str]:
    """The distinct words of a query (`most`, QUERY_MAX_WORDS by default), by their hash:
    what a search looks for, and how a match is told back in words."""
    most = most or QUERY_MAX_WORDS
    found: dict[str, str] = {}
    for word, written in words_as_written(text):
        digest = word_hash(user_id, word)
        if digest not in found:
            found[digest] = written
            if len(found) >= most:
                break
    return found


def any_of(hashes: Iterable[str]) -> str:
    """A tsquery matching a row that holds any of `hashes` (hex only, so nothing in it is
    an operator); empty for none."""
    return " | ".join(hashes)


class HashedWordsField(_SearchVectorField):
    """A tsvector of hashed words (see above), set by whoever writes the row's text, or
    from it on every save when `source` names a method of the model that returns the
    person's id and the text."""

    def __init__(self, *args: Any, source: str | None = None, **kwargs: Any) -> None:
        self.source = source
        kwargs.setdefault("null", True)
        kwargs.setdefault("blank", True)
        kwargs.setdefault("editable", False)
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> Any:
        # `source` names a method, which a migration's historical model lacks: not part of it.
        name, path, args, kwargs = super().deconstruct()
        for default in ("null", "blank", "editable"):
            kwargs.pop(default, None)
        return name, path, args, kwargs

    def pre_save(self, model_instance: Any, add: bool) -> Any:
        if self.source is None:
            return super().pre_save(model_instance, add)
        user_id, text = getattr(model_instance, self.source)()
        value = hashed_words(user_id, text)
        setattr(model_instance, self.attname, value)
        return value
