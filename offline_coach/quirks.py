"""Ways real OpenAI-compatible servers differ from the API, which the offline coach can take
on so the app and `check_model` are tried against them without those servers.

Each was seen with llama-cpp-python's server (0.3.x) and a small model: with its
`chatml-function-calling` chat format it refuses automatic tool choice in a stream (an
HTTP 500 saying so), and calls no tool unless one is named in `tool_choice`; with a chat
format whose template has neither a system role nor tools (`gemma`), the system prompt
and the tools never reach the model (its usage counts only the rest: 24 tokens of a
4,708-character system prompt).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from offline_coach.script import Failure

# Tools reach the model only when `tool_choice` names one; otherwise they are left out.
TOOLS_ONLY_WHEN_FORCED = "tools-only-when-forced"
# A streamed request with tools and an automatic tool choice is refused.
REFUSES_STREAMED_AUTO_TOOL_CHOICE = "refuses-streamed-auto-tool-choice"
# A chat template with neither a system role nor tools: the system (and developer)
# messages and the tool schemas are dropped before the model reads the prompt.
DROPS_SYSTEM_PROMPT = "drops-system-prompt"
QUIRKS = frozenset({TOOLS_ONLY_WHEN_FORCED, REFUSES_STREAMED_AUTO_TOOL_CHOICE, DROPS_SYSTEM_PROMPT})
# llama-cpp-python's words for it, which its server sends as an internal server error.
STREAMED_AUTO_TOOL_CHOICE_REFUSAL = "Automatic streaming tool choice is not supported"
SYSTEM_ROLES = frozenset({"system", "developer"})


def checked(quirks: Collection[str]) -> frozenset[str]:
    """The quirks asked for, refused by name when one is not known."""
    unknown = set(quirks) - QUIRKS
    if unknown:
        raise ValueError(f"unknown quirks {sorted(unknown)}: the offline coach has {sorted(QUIRKS)}")
    return frozenset(quirks)


def as_served(body: dict[str, Any], quirks: frozenset[str]) -> dict[str, Any] | Failure:
    """The request as a server with these quirks would hand it to its model, or its refusal."""
    forced = isinstance(body.get("tool_choice"), dict)
    automatic = body.get("tool_choice") == "auto" and body.get("tools")
    if REFUSES_STREAMED_AUTO_TOOL_CHOICE in quirks and automatic and body.get("stream"):
        return Failure(500, STREAMED_AUTO_TOOL_CHOICE_REFUSAL)
    served = dict(body)
    if TOOLS_ONLY_WHEN_FORCED in quirks and not forced:
        served.pop("tools", None)
        served.pop("tool_choice", None)
    if DROPS_SYSTEM_PROMPT in quirks:
        served.pop("tools", None)
        served.pop("tool_choice", None)
        messages = body.get("messages") or []
        served["messages"] = [m for m in messages if not (isinstance(m, dict) and m.get("role") in SYSTEM_ROLES)]
    return served
