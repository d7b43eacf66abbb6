"""LoCoMo in the app: does what a person said months ago reach the coach when they ask?

    bin/bench locomo --data DIR [--conversations 26,30]

DIR is a folder of LoCoMo conversations (N.json, the format of snap-research/locomo's
locomo10_v2; "Evaluating Very Long-Term Conversational Memory of LLM Agents", Maharana et
al., ACL 2024). The data is never in this repository.

For each conversation, speaker A is the person: each session becomes a conversation in
the app at its date, stored through the app's services (A's turns the person's messages,
B's the coach's replies); what the dataset noted about A is saved through `save_memory`
as a coach would in that turn; each session's summary is kept, and becomes its week's
episode. Embeddings are the offline coach's all-MiniLM-L6-v2. Then, for every question
about A in categories 1-4, asked in A's own voice ("When did I...?"): is an evidence turn
(or its observation) in the prompt the coach would get with the question as the latest
message, among the 5 of `search_memories`, among the lines `search_conversations` returns
(or a summary it returns of the conversation the turn was in)? Printed per conversation
and category, with both forms of the question (A's voice, and the dataset's "When did
Caroline...?"), the look-back's variants side by side (by meaning, by words, fused; the
exchange or a window of turns; the top 5 or the token budget) with their tokens, the
prompt's tokens, the embedding requests and the time per question, and the baselines of
the same run: every observation in the prompt, the top 5 of every observation by the same
embeddings, the whole conversation. Category 5: how often the look-back passed a turn of
B's off as the person's.

A benchmark, not a test: it prints tables.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.setup import django_for_benchmarks

django_for_benchmarks()

from django.conf import settings  # noqa: E402

from bench.long_conversations.block_cost import block_cost_table  # noqa: E402
from bench.long_conversations.dataset import DatasetError, load_conversations  # noqa: E402
from bench.long_conversations.look_back import look_back  # noqa: E402
from bench.long_conversations.questions import Probe  # noqa: E402
from bench.long_conversations.run import measure_conversation  # noqa: E402
from bench.long_conversations.table import (  # noqa: E402
    TARGET_LOOK_BACK,
    TARGET_REACHED,
    Run,
    cost_table,
    forms_table,
    misses,
    question_table,
    reached_table,
    trap_table,
    variants_table,
)
from offline_coach import ModelServer, minilm  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="a folder of LoCoMo conversations (N.json)")
    parser.add_argument("--conversations", help="which, by number, comma-separated (default: every one in DIR)")
    args = parser.parse_args()
    names = [n.strip() for n in args.conversations.split(",") if n.strip()] if args.conversations else None
    try:
        conversations = load_conversations(args.data, names)
    except DatasetError as error:
        parser.error(str(error))

    look = look_back()
    print(f"search_conversations: {'coach.look_back' if look.available else look.why_not}", flush=True)
    minilm.preload()
    # Scripted only so that it records the requests it gets: with nothing queued it answers
    # as the offline coach does, and embeds with all-MiniLM-L6-v2.
    server = ModelServer(scripted=True).start()
    settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY = server.base_url, ""
    settings.EMBEDDING_MODEL, settings.LLM_MAX_RETRIES = minilm.MODEL_NAME, 0
    probe = Probe(look_back=look, embedding_requests=lambda: len(server.embedding_requests()))
    runs: list[Run] = []
    try:
        for conversation in conversations:
            started = time.perf_counter()
            runs.append(measure_conversation(conversation, probe))
            print(
                f"conversation {conversation.name}: ingested in {runs[-1].done.seconds:.0f} s, "
                f"asked in {time.perf_counter() - started - runs[-1].done.seconds:.0f} s",
                flush=True,
            )
    finally:
        server.stop()
    print_tables(runs, look.available, look.why_not)


def print_tables(runs: list[Run], available: bool, why_not: str) -> None:
    print("\nEvidence reaching the coach, questions about speaker A (categories 1-4)")
    print("\n".join(reached_table(runs)))
    asked = [a for run in runs for a in run.asked]
    if available and asked:
        share = sum(a.reached for a in asked) / len(asked)
        verdict = "met" if share >= TARGET_REACHED else "not met"
        print(f"target: evidence reaches the coach for >= {TARGET_REACHED:.0%}: {share:.1%}, {verdict}")
        alone = sum(bool(a.in_conversations) for a in asked) / len(asked)
        within = max(a.look_back_tokens for a in asked)
        verdict = "met" if alone >= TARGET_LOOK_BACK and within <= settings.COACH_LOOK_BACK_MAX_TOKENS else "not met"
        print(
            f"target: the look-back alone >= {TARGET_LOOK_BACK:.0%} within {settings.COACH_LOOK_BACK_MAX_TOKENS:,} "
            f"tokens: {alone:.1%}, its largest result {within:,} tokens, {verdict}"
        )
        print("\nThe memory block, a kept note at a time (target: at most half the JSON line's tokens)")
        print("\n".join(block_cost_table(runs)))
        print("\nThe question in the person's voice and as the dataset words it")
        print("\n".join(forms_table(runs)))
        print("\nThe look-back's variants, questions in the person's voice")
        print("\n".join(variants_table(runs)))
    else:
        print(f"search_conversations {why_not}: its column and the target are not measured")
    print("\nWhat it cost")
    print("\n".join(cost_table(runs)))
    print("(memory block: the target is no more tokens than before the look-back; its budget is")
    print(f" {settings.MEMORY_CONTEXT_BUDGET_TOKENS:,} tokens. Tokens are the app's estimate, 4 characters a token.)")
    print("\nEach question")
    print("\n".join(question_table(runs)))
    print("\nCategory 5 (adversarial): a turn of speaker B's passed off as the person's")
    print("\n".join(trap_table(runs, available)))
    if available:
        print("\nWhat the coach still misses (evidence in neither the prompt nor either search)")
        print("\n".join(misses(runs)))


if __name__ == "__main__":
    main()
