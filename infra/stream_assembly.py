"""Putting a streamed chat completion's tool calls back together, whatever the server.

OpenAI-compatible servers agree on the pieces (`delta.tool_calls`, each with some of `index`,
`id`, `function.name`, `function.arguments`) but not on how they are cut: arguments split
across many chunks or sent whole in one; `index` on every piece, on none, or 0 for every
call; the id on the first piece only or repeated on each; several calls interleaved; or the
legacy `delta.function_call` of servers that predate tools. This module takes them all.

Some send a call in both dialects at once: llama-cpp-python's server (0.3.x) puts each
piece in `delta.tool_calls[0]` and again, the same name and arguments, in the legacy
`delta.function_call` of the same chunk. Taken as two calls, one save would run twice and
count twice against the turn's write cap; so a legacy piece that mirrors a `tool_calls`
piece of its own delta is ignored, and counted (`check_model` tells the operator).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

# The key of the one call a legacy `function_call` delta builds.
_LEGACY = "function_call"


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class ToolCallAssembler:
    """Feed it every delta's tool-call pieces in order; `calls()` gives the finished calls."""

    # Legacy `function_call` pieces passed over because they repeated a `tool_calls` piece.
    mirrored_legacy_pieces: int = 0
    _calls: list[_Call] = field(default_factory=list)
    _by_index: dict[object, _Call] = field(default_factory=dict)
    _by_id: dict[str, _Call] = field(default_factory=dict)

    def add_delta(self, delta: dict[str, Any]) -> None:
        """The tool-call pieces of one chunk's delta, whichever way the server sends them."""
        parts = [part for part in delta.get("tool_calls") or [] if isinstance(part, dict)]
        for part in parts:
            self._add(part)
        legacy = delta.get("function_call")
        if not isinstance(legacy, dict):
            return
        if any(_mirrors(legacy, part) for part in parts):
            # That piece again, in the other dialect.
            self.mirrored_legacy_pieces += 1
        else:
            self._add({"index": _LEGACY, "function": legacy})

    def calls(self) -> list[tuple[str, str, str]]:
        """(id, name, arguments) per call, in the order the calls began. A call the server
        gave no id gets one that is unique in this response, so its result can be matched."""
        taken = {call.id for call in self._calls if call.id}
        finished = []
        for number, call in enumerate(self._calls):
            call_id = call.id
            if not call_id:
                call_id = f"call_{number}"
                while call_id in taken:
                    call_id += "_"
                taken.add(call_id)
            finished.append((call_id, call.name, call.arguments))
        return finished

    def _add(self, part: dict[str, Any]) -> None:
        call = self._call_for(part)
        part_id = part.get("id")
        if isinstance(part_id, str) and part_id and not call.id:
            call.id = part_id
            self._by_id[part_id] = call
        function = _function_of(part)
        name = function.get("name")
        if isinstance(name, str) and name and not call.name:
            call.name = name
        self._append_arguments(call, function.get("arguments"))

    def _call_for(self, part: dict[str, Any]) -> _Call:
        part_id = part.get("id") if isinstance(part.get("id"), str) else ""
        index = part.get("index")
        if part_id and part_id in self._by_id:
            # An id seen before continues its call, wherever the server puts its index.
            return self._by_id[part_id]
        if index is not None and not isinstance(index, bool):
            call = self._by_index.get(index)
            # A new id under an index already in use is a new call: some servers and proxies
            # number every parallel call 0.
            if call is None or (part_id and call.id and call.id != part_id):
                call = self._open()
                self._by_index[index] = call
            return call
        if part_id or not self._calls:
            return self._open()
        # Neither index nor id: the piece continues the call under way.
        return self._calls[-1]

    def _open(self) -> _Call:
        call = _Call()
        self._calls.append(call)
        return call

    @staticmethod
    def _append_arguments(call: _Call, arguments: object) -> None:
        arguments = _as_text(arguments)
        if not arguments:
            return
        if arguments == call.arguments and _is_json(arguments):
            # The whole arguments again (some servers repeat them on the finishing chunk).
            return
        call.arguments += arguments


def _mirrors(legacy: dict[str, Any], part: dict[str, Any]) -> bool:
    """Whether a legacy `function_call` piece says what a `tool_calls` piece of the same
    delta says: the same arguments fragment, and no name that differs."""
    function = _function_of(part)
    if _as_text(legacy.get("arguments")) != _as_text(function.get("arguments")):
        return False
    names = {name for name in (legacy.get("name"), function.get("name")) if isinstance(name, str) and name}
    return len(names) <= 1


def _function_of(part: dict[str, Any]) -> dict[str, Any]:
    function = part.get("function")
    return function if isinstance(function, dict) else {}


def _as_text(arguments: object) -> str:
    if arguments is None:
        return ""
    if not isinstance(arguments, str):
        # A server that sends the arguments as a JSON object rather than its text.
        return json.dumps(arguments)
    return arguments


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
