"""`manage.py calibrate_dedup`: precision and recall of the near-copy flag per threshold,
for the configured EMBEDDING_MODEL, on labelled pairs of coaching facts."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from infra import llm
from infra.llm import LLMError
from memory.calibration import LABELS, SAME, load_pairs, recommend, score, shipped_pairs_path, similarities

EMBED_BATCH = 64


class Command(BaseCommand):
    help = (
        "Embed labelled pairs of coaching facts (same fact reworded / different facts on one topic / unrelated) "
        "with EMBEDDING_MODEL and print, per threshold, how many of each are flagged as near-copies, with the "
        "threshold to set as MEMORY_DEDUP_THRESHOLD. Run it whenever the embedding model changes."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--pairs", type=Path, default=None, help="a JSON Lines file of labelled pairs")
        parser.add_argument("--recall", type=float, default=0.9, help="share of rewordings to flag (default 0.9)")
        parser.add_argument("--from", dest="low", type=float, default=0.30)
        parser.add_argument("--to", dest="high", type=float, default=0.95)
        parser.add_argument("--step", type=float, default=0.025)

    def handle(
        self, *args: Any, pairs: Path | None, recall: float, low: float, high: float, step: float, **_: Any
    ) -> None:
        path = pairs or shipped_pairs_path()
        try:
            labelled = load_pairs(path)
        except (OSError, ValueError, KeyError) as error:
            raise CommandError(f"cannot read the pairs in {path}: {error}") from None
        if not labelled:
            raise CommandError(f"{path} holds no pairs")
        try:
            scores = similarities(labelled, _embed)
        except LLMError as error:
            raise CommandError(f"the embedding model could not be reached: {error}") from None

        model = settings.EMBEDDING_MODEL
        self.stdout.write(f"{len(labelled)} pairs from {path}, embedded with {model}\n")
        self.stdout.write("similarity by label:   min  median   max")
        for label in LABELS:
            values = [s for pair, s in zip(labelled, scores, strict=True) if pair.label == label]
            if values:
                self.stdout.write(
                    f"  {label:<10} ({len(values):>3})  {min(values):.3f}  {statistics.median(values):.3f}"
                    f"  {max(values):.3f}"
                )
        thresholds = [round(low + i * step, 4) for i in range(int((high - low) / step) + 1)]
        table = score(labelled, scores, thresholds)
        self.stdout.write("\nthreshold  flags same (recall)  flags related  flags unrelated  precision")
        for row in table:
            self.stdout.write(
                f"  {row.threshold:.3f}     {row.flagged[SAME]:>3}/{row.totals[SAME]:<3} ({row.recall:5.1%})"
                f"     {row.flagged_share('related'):6.1%}          {row.flagged_share('unrelated'):6.1%}"
                f"       {row.precision:6.1%}"
            )
        chosen = recommend(table, recall_wanted=recall)
        if chosen is None:
            self.stdout.write(f"\nNo threshold from {low} flags {recall:.0%} of the rewordings; lower --from.")
            return
        self.stdout.write(
            f"\nFor {model}: MEMORY_DEDUP_THRESHOLD={chosen.threshold:.3f} flags {chosen.recall:.0%} of rewordings "
            f"and {chosen.flagged_share('related'):.0%} of different facts on one topic (the model is asked about "
            f"those too). Set now: {settings.MEMORY_DEDUP_THRESHOLD}."
        )


def _embed(texts: list[str]) -> list[list[float]]:
    vectors: list[list[float]] = []
    for start in range(0, len(texts), EMBED_BATCH):
        vectors += [embedding.vector for embedding in llm.embed(texts[start : start + EMBED_BATCH])]
    return vectors
