"""The memory's background work."""

from __future__ import annotations

import logging

from celery import shared_task

from infra.llm import LLMError
from memory.maintenance import memories_reembed, memory_history_prune

logger = logging.getLogger(__name__)


@shared_task(ignore_result=True)
def reembed_memories() -> int:
    """Every hour: memories embedded by another model than EMBEDDING_MODEL (it changed, or
    an embedding call failed when they were written) are embedded again, so search and the
    near-copy check see every memory. Nothing to do costs one query."""
    try:
        return memories_reembed()
    except LLMError as error:
        # The next tick tries again; what was done so far is kept.
        logger.warning("memories could not be re-embedded yet: %s", error)
        return 0


@shared_task(ignore_result=True)
def prune_memory_history() -> tuple[int, int]:
    """Every night: the text of forgotten memories that can no longer be restored goes from
    their history, and each person's history keeps its newest MEMORY_HISTORY_MAX_EVENTS."""
    return memory_history_prune()
