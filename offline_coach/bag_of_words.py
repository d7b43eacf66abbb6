"""Bag-of-words embeddings: a feature-hashed bag of stemmed words, the same in every process.

Texts that share most of their words point the same way; anything else is close to
orthogonal, rewordings included. It is not a model of meaning: the offline coach serves
it only under the model name "bag-of-words", for tests that need exact control over what
counts as alike (the app's own offline model is all-MiniLM-L6-v2, in minilm.py). Its word
list and stemmer also serve the offline coach's phrasing.
"""

from __future__ import annotations

import array
import hashlib
import math
import re

DIMENSIONS = 384

STOP_WORDS = frozenset(
    """
    a an the and or but if then so of to in on at by for with from as into onto about over i me my
    mine myself you your yours we our us they them their he him his she her it its this that these
    those there here is am are was were be been being do does did have has had having will would
    shall should can could may might must just very really quite also too than what which who whom
    when where why how all any some each such only own same s t d ll m re ve don doesn didn isn aren
    wasn weren im ive
    """.split()  # noqa: SIM905 - a word list reads best as words
)

# [^\W_] is \w without the underscore: unicode letters and digits ("Rönnells", "5k").
WORD = re.compile(r"[^\W_]+")
SUFFIXES = ("ing", "es", "ed", "s")
# "presses" loses "es" but "shoes" only loses "s": "es" is a suffix after these endings.
ES_AFTER = ("ss", "sh", "ch", "x", "z")
MIN_STEM_LETTERS = 3


MODEL_NAME = "bag-of-words"


def bag_of_words_embedding(text: str) -> list[float]:
    """A unit vector of DIMENSIONS float32-exact values for `text`, identical across processes."""
    vector = [0.0] * DIMENSIONS
    for word in words(text):
        dimension, sign = _slot(word)
        vector[dimension] += sign
    norm = math.sqrt(sum(value * value for value in vector))
    if norm == 0:
        # Nothing left after stop words: a fixed direction, so the vector is still a unit vector.
        return _float32([1 / math.sqrt(DIMENSIONS)] * DIMENSIONS)
    return _float32([value / norm for value in vector])


def words(text: str) -> list[str]:
    """The stemmed content words of `text`, in order: what the embedding counts."""
    return [stem(word) for word in WORD.findall(text.lower()) if word not in STOP_WORDS]


def stem(word: str) -> str:
    """Strip inflections ("pressing", "pressed", "presses" all become "press") from long words."""
    # Twice, so "mornings" meets "morning" at "morn".
    return _strip_suffix(_strip_suffix(word))


def _strip_suffix(word: str) -> str:
    if len(word) <= 4:
        return word
    for suffix in SUFFIXES:
        if not word.endswith(suffix):
            continue
        if suffix == "es" and not word[:-2].endswith(ES_AFTER):
            continue
        if suffix == "s" and word.endswith("ss"):
            return word
        root = word[: -len(suffix)]
        if len(root) < MIN_STEM_LETTERS:
            return word
        if suffix in ("ing", "ed") and len(root) > MIN_STEM_LETTERS and root[-1] == root[-2] and root[-1] not in "lsz":
            root = root[:-1]  # running -> run, stopped -> stop; but pressing -> press
        return root
    return word


def _slot(word: str) -> tuple[int, float]:
    # hashlib, not hash(): Python salts str hashes per process.
    digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
    number = int.from_bytes(digest, "little")
    return number % DIMENSIONS, 1.0 if (number >> 32) & 1 else -1.0


def _float32(vector: list[float]) -> list[float]:
    # Rounded to float32 so the base64 and float encodings of a vector decode identically.
    return array.array("f", vector).tolist()
