"""The baselines, asked in the same run as the app: a store that keeps every observation of
speaker A and returns the top 5 by the same embeddings; and the look-back's own index of
exchanges with the conversations' summaries left out, to tell a search that misses the
turn from one whose 5 places went to summaries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pgvector.django import CosineDistance

from bench.long_conversations.dataset import Conversation, Question
from bench.long_conversations.ingest import Ingested, one_line
from coach.models import ConversationEmbedding
from infra import llm
from memory.embeddings import memory_text

TOP = 5
EMBED_BATCH = 64


@dataclass(frozen=True)
class Baseline:
    top_all: bool
    # None: there is no look-back index on this branch.
    exchanges_alone: bool | None


def baselines(
    conversation: Conversation, done: Ingested, questions: Sequence[Question], *, exchanges: bool
) -> list[Baseline]:
    """Each question against the baselines: its embedding made once, in batches."""
    import numpy as np

    if not questions:
        return []
    asked = _embedded([q.text for q in questions])
    observations = conversation.observations_of(conversation.speaker_a)
    if observations:
        # Embedded as the app embeds a memory: the index line, then the note.
        stored = np.array(_embedded([memory_text(summary=one_line(o.text), content=o.text) for o in observations]))
        top = np.argsort(-(np.array(asked) @ stored.T), axis=1)[:, :TOP]
        noted = [{d for i in row for d in observations[i].dia_ids} for row in top]
    else:
        noted = [set() for _ in questions]
    results = []
    for question, vector, dia_ids in zip(questions, asked, noted, strict=True):
        evidence = set(question.evidence)
        alone = _in_exchanges(done, vector, evidence) if exchanges else None
        results.append(Baseline(top_all=bool(evidence & dia_ids), exchanges_alone=alone))
    return results


def _in_exchanges(done: Ingested, vector: list[float], evidence: set[str]) -> bool:
    nearest = (
        ConversationEmbedding.objects.filter(user=done.user, kind=ConversationEmbedding.Kind.EXCHANGE)
        .annotate(distance=CosineDistance("embedding", vector))
        .order_by("distance", "pk")
        .values_list("message_id", flat=True)[:TOP]
    )
    return any(evidence & set(done.exchange_turns.get(message_id, ())) for message_id in nearest)


def _embedded(texts: list[str]) -> list[list[float]]:
    vectors: list[list[float]] = []
    for start in range(0, len(texts), EMBED_BATCH):
        vectors += [e.vector for e in llm.embed(texts[start : start + EMBED_BATCH])]
    return vectors
