"""Prompt files: each app keeps its own in a `prompts/` folder beside its code."""

from __future__ import annotations

from functools import cache
from importlib.resources import files


@cache
def prompt(package: str, name: str) -> str:
    """The prompt `<package>/prompts/<name>.md`, without its trailing newline.

    Read once per process: prompts ship with the code and change only with a deploy."""
    return (files(package) / "prompts" / f"{name}.md").read_text(encoding="utf-8").strip()
