"""Re-embed memories whose embedding came from another model than EMBEDDING_MODEL."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from infra.llm import LLMError
from memory.maintenance import memories_reembed


class Command(BaseCommand):
    help = "Re-embed, in batches, every memory whose embedding_model differs from EMBEDDING_MODEL."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--batch-size", type=int, default=100)

    def handle(self, *args: Any, batch_size: int, **options: Any) -> None:
        try:
            count = memories_reembed(batch_size=batch_size)
        except LLMError as error:
            raise CommandError(f"stopped: {error}; run it again to carry on where it stopped") from None
        self.stdout.write(f"{count} memories re-embedded with {settings.EMBEDDING_MODEL}")
