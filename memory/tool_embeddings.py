"""Embeddings a memory tool compares: all of one model, whatever the person's store was
embedded by before EMBEDDING_MODEL changed."""

from __future__ import annotations

import contextlib

from infra.llm import LLMError
from memory.maintenance import memories_reembed
from memory.selectors import memories_of_another_model
from memory.tool_context import ToolContext


def embedded_alike(context: ToolContext, model: str) -> None:
    """Before a near-copy check or a search, which compare embeddings of one model: the
    person's memories embedded by another (EMBEDDING_MODEL changed, and the hourly
    re-embedding has not reached them yet) are embedded again now, so that the check sees
    every memory. Cheaper than embedding each new text with every older model too, which
    may not even be served any more: once per person, not once per save. Looked at once a
    turn: what the turn saves itself is embedded by `model`."""
    if context.embedded_by == model:
        return
    context.embedded_by = model
    user = context.user
    if memories_of_another_model(user=user, model=model):
        # If the model fails now, the check goes on with what it can compare; the hourly
        # job tries again.
        with contextlib.suppress(LLMError):
            memories_reembed(user=user)
