"""The benchmark's tables: what reached the coach, per conversation and category and over
all, beside the baselines; what it cost; and the wrong-speaker check of category 5."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench.long_conversations.dataset import ANSWERABLE, Conversation
from bench.long_conversations.ingest import Ingested
from bench.long_conversations.look_back import VARIANTS
from bench.long_conversations.questions import Asked, median_ms

CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
TARGET_REACHED = 0.88
TARGET_LOOK_BACK = 0.78
# The measurement of the memory block before the look-back (conversations of LoCoMo).
BLOCK_TOKENS_BEFORE = "4,400-4,600"


@dataclass(frozen=True)
class Run:
    """One conversation, played in and asked."""

    conversation: Conversation
    done: Ingested
    asked: list[Asked]
    ingest_embeddings: int
    look_back_embeddings: int
    traps: tuple[int, int, int]
    observations_tokens: int
    whole_tokens: int
    kept: int


def _share(asked: Sequence[Asked], hit: Callable[[Asked], bool | None]) -> str:
    if not asked:
        return "-"
    hits = [hit(a) for a in asked]
    if any(h is None for h in hits):
        return "not available"
    count = sum(bool(h) for h in hits)
    return f"{count / len(asked):.0%} ({count})"


COLUMNS: tuple[tuple[str, Callable[[Asked], bool | None]], ...] = (
    ("in the prompt", lambda a: a.in_prompt),
    ("search_memories top 5", lambda a: a.in_memories),
    ("prompt or search_memories", lambda a: a.reached_today),
    ("search_conversations (target >= 78%)", lambda a: a.in_conversations),
    ("a summary it returned", lambda a: None if a.in_conversations is None else a.through_summary),
    ("any of these (target >= 88%)", lambda a: None if a.in_conversations is None else a.reached),
    ("any, asked as the dataset words it", lambda a: None if a.in_conversations is None else a.reached_as_written),
    ("baseline: top 5 of every observation", lambda a: a.top_all),
    ("baseline: the look-back's top 5 of exchanges alone", lambda a: a.exchanges_alone),
    ("baseline: every observation in the prompt", lambda a: a.noted),
)


def reached_table(runs: Sequence[Run]) -> list[str]:
    head = "| conversation | category | questions | " + " | ".join(name for name, _ in COLUMNS) + " |"
    rows = [head, "|---|---|---:|" + "---:|" * len(COLUMNS)]
    for name, asked in _groups(runs):
        for category in (*ANSWERABLE, None):
            chosen = [a for a in asked if category is None or a.question.category == category]
            if not chosen:
                continue
            label = "all 1-4" if category is None else f"{category} {CATEGORY_NAMES[category]}"
            cells = " | ".join(_share(chosen, hit) for _, hit in COLUMNS)
            rows.append(f"| {name} | {label} | {len(chosen)} | {cells} |")
    return rows


def cost_table(runs: Sequence[Run]) -> list[str]:
    rows = [
        "| conversation | sessions | turns | exchanges | ingest s "
        "| embedding requests in ingest: all (the coach's saves and episodes; the look-back's) "
        "| the look-back's per exchange (target <= 1) | observations of A: saved, kept at the end "
        "| saves flagged as near-copies "
        "| prompt tokens p50 | look-back result tokens p50 / max | memory block tokens (before: "
        + BLOCK_TOKENS_BEFORE
        + ") "
        "| every observation, tokens | whole conversation, tokens |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---|---:|---:|---:|",
    ]
    for run in runs:
        c, done = run.conversation, run.done
        observed = len(c.observations_of(c.speaker_a))
        prompt = statistics.median(a.prompt_tokens for a in run.asked) if run.asked else 0
        blocks = sorted({a.memory_tokens for a in run.asked})
        block = "-" if not blocks else f"{blocks[0]:,}" if len(blocks) == 1 else f"{blocks[0]:,}-{blocks[-1]:,}"
        rows.append(
            f"| {c.name} | {len(c.sessions)} | {len(c.turns())} | {done.exchanges} | {done.seconds:.0f} "
            f"| {run.ingest_embeddings} ({run.ingest_embeddings - run.look_back_embeddings}; "
            f"{run.look_back_embeddings}) "
            f"| {_look_back_share(run)} "
            f"| {observed}: {done.saves['saved']}, {run.kept} | {done.saves['flagged as a near-copy, kept separate']} "
            f"| {prompt:,.0f} | {_look_back_tokens(run)} | {block} | {run.observations_tokens:,} "
            f"| {run.whole_tokens:,} |"
        )
    return rows


def _look_back_tokens(run: Run) -> str:
    tokens = sorted(a.look_back_tokens for a in run.asked)
    if not tokens or not tokens[-1]:
        return "-"
    return f"{statistics.median(tokens):,.0f} / {tokens[-1]:,}"


def _look_back_share(run: Run) -> str:
    if run.asked and run.asked[0].in_conversations is None:
        return "not available"
    return f"{run.look_back_embeddings / max(run.done.exchanges, 1):.2f}"


def question_table(runs: Sequence[Run]) -> list[str]:
    steps = ("prompt", "search_memories", "search_conversations")
    rows = [
        "| conversation | questions | summaries among search_conversations' results, a question "
        "| embedding requests a question: prompt / search_memories / search_conversations "
        "| ms a question, p50: prompt / search_memories / search_conversations "
        "| search_conversations / search_memories |",
        "|---|---:|---:|---|---|---:|",
    ]
    for run in runs:
        embeds = " / ".join(_per_question(run.asked, step) for step in steps)
        times = [median_ms(run.asked, step) for step in steps]
        shown = " / ".join("not available" if t is None else f"{t:.1f}" for t in times)
        ratio = "-" if times[2] is None or not times[1] else f"{times[2] / times[1]:.2f}x"
        summaries = (
            "not available"
            if _look_back_share(run) == "not available"
            else f"{sum(a.summaries_found for a in run.asked) / max(len(run.asked), 1):.1f}"
        )
        rows.append(f"| {run.conversation.name} | {len(run.asked)} | {summaries} | {embeds} | {shown} | {ratio} |")
    return rows


def _per_question(asked: Sequence[Asked], step: str) -> str:
    values = [a.embeddings[step] for a in asked if step in a.embeddings]
    return "not available" if not values else f"{sum(values) / len(values):.2f}"


def forms_table(runs: Sequence[Run]) -> list[str]:
    """The two searches asked in the person's voice and as the dataset words the question."""
    rows = [
        "| conversation | questions | search_memories: person's voice / dataset's words "
        "| search_conversations: person's voice / dataset's words |",
        "|---|---:|---|---|",
    ]
    for name, asked in _groups(runs):
        memories = f"{_share(asked, lambda a: a.in_memories)} / {_share(asked, lambda a: a.in_memories_as_written)}"
        looked = (
            f"{_share(asked, lambda a: a.in_conversations)} / {_share(asked, lambda a: a.in_conversations_as_written)}"
        )
        rows.append(f"| {name} | {len(asked)} | {memories} | {looked} |")
    return rows


def variants_table(runs: Sequence[Run]) -> list[str]:
    """The look-back's variants side by side, questions in the person's voice: how often an
    evidence turn is among the lines returned, and the result's tokens (mean and p95)."""
    asked = [a for run in runs for a in run.asked if a.variants]
    rows = [
        "| look-back variant | questions | evidence among the lines | result tokens, mean | p95 |",
        "|---|---:|---:|---:|---:|",
    ]
    for variant in VARIANTS:
        tried = [a.variants[variant.name] for a in asked if variant.name in a.variants]
        if not tried:
            continue
        tokens = sorted(t for _, t in tried)
        found = sum(hit for hit, _ in tried)
        rows.append(
            f"| {variant.name} | {len(tried)} | {found / len(tried):.1%} ({found}) | "
            f"{statistics.mean(tokens):,.0f} | {tokens[int(0.95 * (len(tokens) - 1))]:,} |"
        )
    return rows


def _groups(runs: Sequence[Run]) -> list[tuple[str, list[Asked]]]:
    groups = [(run.conversation.name, run.asked) for run in runs]
    if len(runs) > 1:
        groups.append(("all", [a for run in runs for a in run.asked]))
    return groups


def trap_table(runs: Sequence[Run], available: bool) -> list[str]:
    rows = [
        "| conversation | category 5 questions answered by B's words | look-backs that returned such a turn "
        "| presented as the person's (target 0) |",
        "|---|---:|---:|---:|",
    ]
    for run in runs:
        questions, returned, passed_off = run.traps
        shown = (f"{returned}", f"{passed_off}") if available else ("not available", "not available")
        rows.append(f"| {run.conversation.name} | {questions} | {shown[0]} | {shown[1]} |")
    return rows


def misses(runs: Sequence[Run], most: int = 3) -> list[str]:
    """A few questions whose evidence reached the coach by none of the three, one per
    category while they last: the evidence turn as said, and whether its fact was noted."""
    lines: list[str] = []
    seen: set[int] = set()
    for run in runs:
        turns = run.conversation.turns()
        for asked in run.asked:
            q = asked.question
            if asked.reached or asked.in_conversations is None or q.category in seen:
                continue
            seen.add(q.category)
            said = "; ".join(f"{turns[d].speaker} ({d}): {turns[d].text[:160]}" for d in q.evidence)
            noted = "noted as an observation" if asked.noted else "never noted as an observation"
            lines.append(f"- {run.conversation.name}, category {q.category}: {q.text!r} (answer {q.answer!r}); {noted}")
            lines.append(f"  evidence: {said}")
            if len(seen) >= most:
                return lines
    return lines
