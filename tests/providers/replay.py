"""The provider fixtures in this folder, read as the server sent them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent
PROVIDERS = sorted(path.name for path in FIXTURES.iterdir() if (path / "meta.json").is_file())
# The words every provider's text-only fixture streams.
REPLY = "Got it. I'll plan around your mornings."


def meta(provider: str) -> dict[str, Any]:
    return json.loads((FIXTURES / provider / "meta.json").read_text(encoding="utf-8"))


def stream_events(provider: str, name: str) -> list[str]:
    """The `data:` payloads of a recorded stream, in order, exactly as written."""
    text = (FIXTURES / provider / name).read_text(encoding="utf-8")
    return [line[len("data: ") :] for line in text.split("\n") if line.startswith("data: ")]


def embeddings_body(provider: str) -> str:
    return (FIXTURES / provider / "embeddings.json").read_text(encoding="utf-8")


def parallel_fixtures() -> list[tuple[str, str]]:
    """(provider, stream) for every recorded stream in which the model calls two tools at once."""
    return [
        (provider, name)
        for provider in PROVIDERS
        for name, arguments in meta(provider)["expected_arguments"].items()
        if len(arguments) == 2
    ]
