"""`manage.py calibrate_dedup`: what the near-copy flag flags per pair of thresholds (close
in meaning and sharing a word, or far above whatever the words), for the configured
EMBEDDING_MODEL, on labelled pairs of coaching facts; and meaning alone beside it."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from infra import llm
from infra.llm import LLMError
from memory.calibration import (
    LABELS,
    SAME,
    ThresholdScore,
    load_pairs,
    one_theme_pairs_path,
    recommend,
    score,
    shipped_pairs_path,
    similarities,
)

EMBED_BATCH = 64
# How long one batch may take. A run embeds some 600 texts, and a person starts it and waits
# for it: a busy server is waited for, where a chat turn's embeddings get
# EMBEDDING_TIMEOUT_SECONDS, since a person waits on those word by word.
BATCH_TIMEOUT_SECONDS = 300.0


class Command(BaseCommand):
    help = (
        "Embed labelled pairs of coaching facts (same fact reworded / different facts on one topic / unrelated, and "
        "different facts of one theme in other words) with EMBEDDING_MODEL and print, per pair of thresholds, how "
        "many of each are flagged as near-copies, with the two to set as MEMORY_DEDUP_THRESHOLD and "
        "MEMORY_DEDUP_FAR_THRESHOLD. Run it whenever the embedding model changes."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--pairs", type=Path, default=None, help="a JSON Lines file of labelled pairs")
        parser.add_argument(
            "--one-theme", type=Path, default=None, help="a JSON Lines file of different facts of one theme"
        )
        parser.add_argument("--recall", type=float, default=0.85, help="share of rewordings to flag (default 0.85)")
        parser.add_argument("--from", dest="low", type=float, default=0.30)
        parser.add_argument("--to", dest="high", type=float, default=0.95)
        parser.add_argument("--step", type=float, default=0.01)
        parser.add_argument(
            "--batch-timeout",
            type=float,
            default=BATCH_TIMEOUT_SECONDS,
            help=f"seconds each batch of {EMBED_BATCH} texts may take (default {BATCH_TIMEOUT_SECONDS:g})",
        )

    def handle(
        self,
        *args: Any,
        pairs: Path | None,
        one_theme: Path | None,
        recall: float,
        low: float,
        high: float,
        step: float,
        batch_timeout: float,
        **_: Any,
    ) -> None:
        path, theme_path = pairs or shipped_pairs_path(), one_theme or one_theme_pairs_path()
        try:
            labelled = load_pairs(path)
            themed = load_pairs(theme_path, one_theme=True)
        except (OSError, ValueError, KeyError) as error:
            raise CommandError(f"cannot read the pairs: {error}") from None
        if not labelled:
            raise CommandError(f"{path} holds no pairs")
        try:
            scores = similarities([*labelled, *themed], lambda texts: _embed(texts, batch_seconds=batch_timeout))
        except LLMError as error:
            raise CommandError(f"the embedding model could not be reached: {error}") from None

        model = settings.EMBEDDING_MODEL
        self.stdout.write(f"{len(labelled)} pairs from {path}, embedded with {model}")
        self.stdout.write(f"and {len(themed)} pairs of different facts of one theme from {theme_path}\n")
        self.stdout.write("similarity by label:   min  median   max")
        groups = [(label, [p.label == label and not p.one_theme for p in labelled]) for label in LABELS]
        for label, wanted in [*groups, ("one theme", [False] * len(labelled) + [True] * len(themed))]:
            values = [s for keep, s in zip(wanted, scores, strict=False) if keep]
            if values:
                self.stdout.write(
                    f"  {label:<10} ({len(values):>3})  {min(values):.3f}  {statistics.median(values):.3f}"
                    f"  {max(values):.3f}"
                )
        thresholds = [round(low + i * step, 4) for i in range(int((high - low) / step) + 1)]
        pairs_all = [*labelled, *themed]
        alone = score(pairs_all, scores, thresholds)
        self.stdout.write("\nMeaning alone:")
        self._table([row for row in alone if round(row.threshold * 100) % 5 == 0])
        table = score(pairs_all, scores, thresholds, thresholds)
        chosen = recommend(table, recall_wanted=recall)
        if chosen is None:
            self.stdout.write(f"\nNo thresholds from {low} flag {recall:.0%} of the rewordings; lower --from.")
            return
        self.stdout.write(f"\nClose in meaning and sharing a word, or far above ({chosen.far_threshold:.3f}):")
        self._table(
            [row for row in table if row.far_threshold == chosen.far_threshold and round(row.threshold * 100) % 5 == 0]
        )
        before = next((row for row in alone if row.threshold == settings.MEMORY_DEDUP_THRESHOLD), None)
        self.stdout.write(
            f"\nFor {model}: MEMORY_DEDUP_THRESHOLD={chosen.threshold:.3f} and "
            f"MEMORY_DEDUP_FAR_THRESHOLD={chosen.far_threshold:.3f} flag {chosen.recall:.0%} of rewordings, "
            f"{chosen.flagged_share('related'):.0%} of different facts on one topic (the model is asked about those "
            f"too) and {chosen.one_theme_flagged} of {chosen.one_theme_total} different facts of one theme. "
            f"Set now: {settings.MEMORY_DEDUP_THRESHOLD} and {settings.MEMORY_DEDUP_FAR_THRESHOLD}."
        )
        if before is not None:
            self.stdout.write(
                f"Meaning alone at {before.threshold:.3f} flags {before.recall:.0%} of rewordings and "
                f"{before.one_theme_flagged} of {before.one_theme_total} different facts of one theme."
            )

    def _table(self, rows: list[ThresholdScore]) -> None:
        self.stdout.write("threshold  flags same (recall)  flags related  flags unrelated  one theme  precision")
        for row in rows:
            self.stdout.write(
                f"  {row.threshold:.3f}     {row.flagged[SAME]:>3}/{row.totals[SAME]:<3} ({row.recall:5.1%})"
                f"     {row.flagged_share('related'):6.1%}          {row.flagged_share('unrelated'):6.1%}"
                f"      {row.one_theme_flagged:>2}/{row.one_theme_total:<2}   {row.precision:6.1%}"
            )


def _embed(texts: list[str], *, batch_seconds: float) -> list[list[float]]:
    vectors: list[list[float]] = []
    for start in range(0, len(texts), EMBED_BATCH):
        batch = llm.embed(texts[start : start + EMBED_BATCH], within_seconds=batch_seconds)
        vectors += [embedding.vector for embedding in batch]
    return vectors
