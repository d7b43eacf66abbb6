"""When a memory reads like another: the near-copy flag of a save, an import's and the
memory page's look-alikes. Similarity is a flag, not a verdict (DESIGN.md 3.2), and meaning
alone flags different facts of one theme (a climbing trip and a finger injury, 0.47 with
all-MiniLM-L6-v2): the flag asks the words to agree with the meaning. Two memories are near
when they are at least MEMORY_DEDUP_THRESHOLD close in meaning and share a word, or at
least MEMORY_DEDUP_FAR_THRESHOLD close whatever their words. `calibrate_dedup` sets both for
an embedding model; the flag names what matched."""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings

from memory.retrieval import Why

# What a search for near-copies asks for before the rule sorts them: enough that one close
# in meaning, low in the fused order, still comes up.
CANDIDATES = 10


def is_near(why: Why, *, threshold: float | None = None, far_threshold: float | None = None) -> bool:
    """Whether a memory found with `why` is near enough to be flagged (see above)."""
    similarity = why.similarity
    if similarity is None:
        return False
    if threshold is None:
        threshold = settings.MEMORY_DEDUP_THRESHOLD
    if far_threshold is None:
        far_threshold = settings.MEMORY_DEDUP_FAR_THRESHOLD
    return similarity >= far_threshold or (similarity >= threshold and why.by_words)


def is_near_pair(similarity: float, shared_words: int, *, threshold: float, far_threshold: float) -> bool:
    """The same rule for a labelled pair (calibration): its similarity and how many words it shares."""
    return is_near(
        Why(words=("",) * shared_words, similarity=similarity, by_meaning=True),
        threshold=threshold,
        far_threshold=far_threshold,
    )


def shared(first: Sequence[str], second: Sequence[str]) -> int:
    """How many distinct words two texts' word lists (infra.hashed_words.words) share."""
    return len(set(first) & set(second))
