"""What the offline coach answers a chat completion with, before it becomes JSON or a stream."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ToolCall:
    """A function call: its name and its arguments as JSON text, sent verbatim."""

    name: str
    # Text, not a dict: a scripted test may send malformed JSON on purpose.
    arguments: str


@dataclass(frozen=True)
class Reply:
    """An assistant message: text, tool calls, or both."""

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()

    @property
    def finish_reason(self) -> str:
        """ "tool_calls" when the model calls functions, else "stop"."""
        return "tool_calls" if self.tool_calls else "stop"
