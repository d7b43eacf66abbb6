"""Calibrating the near-copy threshold of `save_memory` for an embedding model.

Similarity is a flag, not a verdict (DESIGN.md section 3.2): the same fact reworded and
two different facts on one topic overlap in cosine similarity for every model. What a
threshold can do is flag most rewordings (so the model is asked to merge) while sparing
most different facts the question. The shipped pairs (coaching_pairs.jsonl, written for
this project) are labelled "same" (one fact reworded), "related" (different facts on one
topic: a talk in June and a talk in March) and "unrelated"; `calibrate` scores every
threshold on them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

SAME, RELATED, UNRELATED = "same", "related", "unrelated"
LABELS = (SAME, RELATED, UNRELATED)


@dataclass(frozen=True)
class Pair:
    a: str
    b: str
    label: str
    topic: str


@dataclass(frozen=True)
class ThresholdScore:
    """How a threshold flags the pairs: a flag is a similarity at or above it."""

    threshold: float
    flagged: dict[str, int]
    totals: dict[str, int]

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


def load_pairs(path: Path) -> list[Pair]:
    """The labelled pairs of a JSON Lines file: {"a", "b", "label", "topic"} per line."""
    pairs = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        if row.get("label") not in LABELS:
            raise ValueError(f"{path}:{number}: label must be one of {', '.join(LABELS)}")
        pairs.append(Pair(a=row["a"], b=row["b"], label=row["label"], topic=row.get("topic", "")))
    return pairs


def similarities(pairs: Sequence[Pair], embed: Callable[[list[str]], list[list[float]]]) -> list[float]:
    """The cosine similarity of each pair, embedding every distinct text once."""
    texts = list(dict.fromkeys(text for pair in pairs for text in (pair.a, pair.b)))
    vectors = dict(zip(texts, embed(texts), strict=True))
    return [_cosine(vectors[pair.a], vectors[pair.b]) for pair in pairs]


def score(pairs: Sequence[Pair], scores: Sequence[float], thresholds: Sequence[float]) -> list[ThresholdScore]:
    totals = {label: sum(1 for p in pairs if p.label == label) for label in LABELS}
    return [
        ThresholdScore(
            threshold=threshold,
            flagged={
                label: sum(1 for p, s in zip(pairs, scores, strict=True) if p.label == label and s >= threshold)
                for label in LABELS
            },
            totals=totals,
        )
        for threshold in thresholds
    ]


def recommend(table: Sequence[ThresholdScore], *, recall_wanted: float) -> ThresholdScore | None:
    """The highest threshold that still flags `recall_wanted` of the rewordings: the one
    that asks the model about different facts least while catching that many copies."""
    good = [row for row in table if row.recall >= recall_wanted]
    return max(good, key=lambda row: row.threshold) if good else None


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0
