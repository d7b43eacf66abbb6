"""What one kept memory costs in the memory block, measured on the store a conversation left:
its full note as the block writes it now, its one line, and the JSON line the block wrote
before this form (key, tier, source, summary, content, date), for the same memories in the
same run. Weekly episodes are left out: they are the record of a week, not a note."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from zoneinfo import ZoneInfo

from django.utils import timezone

from bench.long_conversations.table import Run
from infra.tokens import estimate_tokens
from memory.memory_lines import MemoryLine, index_line, whole_text
from memory.models import Category, Memory, author_for_model


def _json_before(memory: Memory, zone: ZoneInfo) -> str:
    # The block's full-note line until this round: one JSON object per memory.
    return json.dumps(
        {
            "key": memory.key,
            "tier": memory.tier,
            "source": {"you": "you", "them": "the person"}.get(author_for_model(memory.source), "support"),
            "summary": memory.summary,
            "content": memory.content,
            "date": memory.updated_at.astimezone(zone).date().isoformat(),
        },
        ensure_ascii=False,
    )


def block_cost_table(runs: Sequence[Run]) -> list[str]:
    rows = [
        "| conversation | notes kept | a note in full, tokens (mean) | as its line | as the JSON line before "
        "| now / before |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        zone = ZoneInfo(run.done.user.time_zone)
        notes = [m for m in Memory.objects.filter(user=run.done.user) if m.category != Category.EPISODE]
        if not notes:
            continue
        today = timezone.now().astimezone(zone).date()
        now = [estimate_tokens(whole_text(MemoryLine.of(m, zone), today=today, zone=zone) + "\n") for m in notes]
        line = [estimate_tokens(index_line(MemoryLine.of(m, zone), today=today, zone=zone) + "\n") for m in notes]
        before = [estimate_tokens(_json_before(m, zone) + "\n") for m in notes]
        rows.append(
            f"| {run.conversation.name} | {len(notes)} | {statistics.mean(now):.1f} | {statistics.mean(line):.1f} "
            f"| {statistics.mean(before):.1f} | {statistics.mean(now) / statistics.mean(before):.2f} |"
        )
    return rows
