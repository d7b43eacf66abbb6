"""What text of a memory is embedded, and asking the model gateway for it."""

from __future__ import annotations

from infra import llm
from infra.llm import Embedding


def memory_text(*, summary: str, content: str) -> str:
    """The text a memory is compared by: its one-line hook, then the note."""
    return summary if content.strip() == summary.strip() else f"{summary}\n{content}"


def embed_memory(*, summary: str, content: str) -> Embedding:
    return llm.embed([memory_text(summary=summary, content=content)])[0]


def embed_query(text: str) -> Embedding:
    return llm.embed([text])[0]
