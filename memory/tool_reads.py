"""The memory tools that read: a search by words and meaning (memory/retrieval.py), and full
notes opened by key."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from infra.llm import Embedding, LLMError
from memory.embeddings import embed_query
from memory.selectors import memories_by_keys, memories_by_similarity
from memory.tool_context import ToolContext, ToolRefusal, memory_as_result, require_memory_on
from memory.tool_embeddings import embedded_alike
from memory.tool_schemas import RECALL_MAX_KEYS


def search_memories(context: ToolContext, *, query: str, limit: int | None) -> dict[str, Any]:
    if not query.strip():
        raise ToolRefusal("the query is empty")
    limit = max(1, min(limit or settings.MEMORY_SEARCH_LIMIT, settings.MEMORY_SEARCH_LIMIT))
    try:
        embedding: Embedding | None = embed_query(query)
    except LLMError:
        # The words still find what they find: a search is not lost to an outage.
        embedding = None
    if embedding is not None:
        embedded_alike(context, embedding.model)
    found = memories_by_similarity(
        user=context.user,
        vector=embedding.vector if embedding else None,
        model=embedding.model if embedding else "",
        text=query,
        limit=limit,
        in_use_only=True,
    )
    if not found:
        require_memory_on(context)
    by_words_alone = {"note": "found by words alone: the embedding model did not answer"} if embedding is None else {}
    return {
        "status": "found",
        **by_words_alone,
        "memories": [
            {
                "key": s.memory.key,
                "tier": s.memory.tier,
                "category": s.memory.category,
                "summary": s.memory.summary,
                "similarity": s.similarity,
                "found_by": s.why.says(),
            }
            for s in found
        ],
    }


def recall_memory(context: ToolContext, *, keys: list[str]) -> dict[str, Any]:
    if not keys or len(keys) > RECALL_MAX_KEYS:
        raise ToolRefusal(f"ask for between 1 and {RECALL_MAX_KEYS} keys")
    found = memories_by_keys(user=context.user, keys=keys, in_use_only=True)
    if not found:
        require_memory_on(context)
    return {
        "status": "found",
        "memories": [memory_as_result(m) for m in found],
        "unknown": [key for key in keys if key not in {m.key for m in found}],
    }
