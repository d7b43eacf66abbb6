"""Calibrating the near-copy flag of `save_memory` for an embedding model.

Similarity is a flag, not a verdict (DESIGN.md section 3.2): the same fact reworded and
two different facts on one topic overlap in cosine similarity for every model. The flag
asks the words to agree (memory/near_copies.py): two memories are near when they are at
least a threshold close and share a word, or a far threshold close whatever their words.
What the two thresholds can do is flag most rewordings (so the model is asked to merge)
while sparing different facts the question. The shipped pairs (coaching_pairs.jsonl,
written for this project) are labelled "same" (one fact reworded), "related" (different
facts on one topic: a talk in June and a talk in March) and "unrelated"; beside them,
one_theme_pairs.jsonl holds different facts of one theme in other words (a climbing trip
and a finger injury; two allergies; two talks in different months), which meaning alone
flags and the words must spare. `score` scores every pair of thresholds on them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from infra.hashed_words import words
from memory.near_copies import is_near_pair

SAME, RELATED, UNRELATED = "same", "related", "unrelated"
LABELS = (SAME, RELATED, UNRELATED)


@dataclass(frozen=True)
class Pair:
    a: str
    b: str
    label: str
    topic: str
    # From one_theme_pairs.jsonl: different facts of one theme, none of which may be flagged.
    one_theme: bool = False

    @property
    def shared_words(self) -> int:
        """How many words the two share, as a search by words counts them."""
        return len(set(words(self.a)) & set(words(self.b)))


@dataclass(frozen=True)
class ThresholdScore:
    """How a pair of thresholds flags the pairs (memory/near_copies.py's rule); with no far
    threshold, meaning alone: a similarity at or above `threshold`."""

    threshold: float
    flagged: dict[str, int]
    totals: dict[str, int]
    far_threshold: float | None = None
    # Of the different facts of one theme: how many are flagged, of how many.
    one_theme_flagged: int = 0
    one_theme_total: int = 0

    @property
    def recall(self) -> float:
        """The share of rewordings of one fact that are flagged."""
        return self.flagged[SAME] / self.totals[SAME] if self.totals[SAME] else 0.0

    @property
    def precision(self) -> float:
        """The share of flags that are rewordings, not different facts."""
        flags = sum(self.flagged.values())
        return self.flagged[SAME] / flags if flags else 1.0

    def flagged_share(self, label: str) -> float:
        return self.flagged[label] / self.totals[label] if self.totals[label] else 0.0


def shipped_pairs_path() -> Path:
    return Path(str(files("memory.calibration") / "coaching_pairs.jsonl"))


def one_theme_pairs_path() -> Path:
    return Path(str(files("memory.calibration") / "one_theme_pairs.jsonl"))


def load_pairs(path: Path, *, one_theme: bool = False) -> list[Pair]:
    """The labelled pairs of a JSON Lines file: {"a", "b", "label", "topic"} per line."""
    pairs = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        if row.get("label") not in LABELS:
            raise ValueError(f"{path}:{number}: label must be one of {', '.join(LABELS)}")
        pairs.append(Pair(a=row["a"], b=row["b"], label=row["label"], topic=row.get("topic", ""), one_theme=one_theme))
    return pairs


def similarities(pairs: Sequence[Pair], embed: Callable[[list[str]], list[list[float]]]) -> list[float]:
    """The cosine similarity of each pair, embedding every distinct text once."""
    texts = list(dict.fromkeys(text for pair in pairs for text in (pair.a, pair.b)))
    vectors = dict(zip(texts, embed(texts), strict=True))
    return [_cosine(vectors[pair.a], vectors[pair.b]) for pair in pairs]


def score(
    pairs: Sequence[Pair],
    scores: Sequence[float],
    thresholds: Sequence[float],
    far_thresholds: Sequence[float | None] = (None,),
) -> list[ThresholdScore]:
    """Every pair of thresholds (far ones not below the threshold), scored on the pairs; a
    far threshold of None scores meaning alone. The one-theme pairs are counted apart."""
    shipped = [(p, s) for p, s in zip(pairs, scores, strict=True) if not p.one_theme]
    theme = [(p, s) for p, s in zip(pairs, scores, strict=True) if p.one_theme]
    totals = {label: sum(1 for p, _ in shipped if p.label == label) for label in LABELS}
    table = []
    for threshold in thresholds:
        for far in far_thresholds:
            if far is not None and far < threshold:
                continue

            def flags(pair: Pair, similarity: float, threshold: float = threshold, far: float | None = far) -> bool:
                if far is None:
                    return similarity >= threshold
                return is_near_pair(similarity, pair.shared_words, threshold=threshold, far_threshold=far)

            table.append(
                ThresholdScore(
                    threshold=threshold,
                    far_threshold=far,
                    flagged={label: sum(1 for p, s in shipped if p.label == label and flags(p, s)) for label in LABELS},
                    totals=totals,
                    one_theme_flagged=sum(1 for p, s in theme if flags(p, s)),
                    one_theme_total=len(theme),
                )
            )
    return table


def recommend(table: Sequence[ThresholdScore], *, recall_wanted: float) -> ThresholdScore | None:
    """Of the rows that flag `recall_wanted` of the rewordings, the one that flags the
    fewest different facts of one theme, then the most rewordings, then the fewest
    different facts on one topic, then the highest thresholds (the one that asks the model
    about different facts least). None when no row flags that many rewordings."""
    good = [row for row in table if row.recall >= recall_wanted]
    if not good:
        return None
    return max(
        good,
        key=lambda row: (
            -row.one_theme_flagged,
            row.flagged[SAME],
            -row.flagged[RELATED],
            row.threshold,
            -(row.far_threshold or 0.0),
        ),
    )


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0
