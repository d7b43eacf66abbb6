from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.core import checks


class MemoryConfig(AppConfig):
    name = "memory"
    # The admin's section title, in the words support staff use.
    verbose_name = "Memories"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        checks.register(memory_budget_holds_a_full_index)


def memory_budget_holds_a_full_index(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The memory block never exceeds its budget, and within the ceiling every memory has
    its index line: both hold only if the budget can carry a full store's index."""
    from django.conf import settings

    from memory.context import fixed_tokens_at_most, index_line_tokens_at_most

    lines = settings.MEMORY_MAX_STORED + settings.MEMORY_MAX_EPISODES
    needed = fixed_tokens_at_most() + lines * index_line_tokens_at_most()
    if needed > settings.MEMORY_CONTEXT_BUDGET_TOKENS:
        return [
            checks.Error(
                f"MEMORY_CONTEXT_BUDGET_TOKENS is {settings.MEMORY_CONTEXT_BUDGET_TOKENS}; a full store's index "
                f"({lines} lines at most) needs {needed}.",
                hint="Raise MEMORY_CONTEXT_BUDGET_TOKENS, or lower MEMORY_MAX_STORED or MEMORY_MAX_EPISODES.",
                id="memory.E001",
            )
        ]
    return []
