"""Embed the exchanges and summaries the look-back searches that EMBEDDING_MODEL has not."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from coach.exchange_index import exchanges_index_everyone
from infra.llm import LLMError


class Command(BaseCommand):
    help = (
        "Embed, in batches, every exchange and summary of a remembered conversation not yet embedded by "
        "EMBEDDING_MODEL (after changing it, or to catch up at once rather than within the hour)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            count = exchanges_index_everyone()
        except LLMError as error:
            raise CommandError(f"stopped: {error}; run it again to carry on where it stopped") from None
        self.stdout.write(f"{count} exchanges and summaries embedded with {settings.EMBEDDING_MODEL}")
