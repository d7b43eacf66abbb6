"""Putting a streamed chat completion's tool calls back together, whatever the server.

OpenAI-compatible servers agree on the pieces (`delta.tool_calls`, each with some of `index`,
`id`, `function.name`, `function.arguments`) but not on how they are cut: arguments split
across many chunks or sent whole in one; `index` on every piece, on none, or 0 for every
call; the id on the first piece only or repeated on each; several calls interleaved; or the
legacy `delta.function_call` of servers that predate tools. This module takes them all.
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

    _calls: list[_Call] = field(default_factory=list)
    _by_index: dict[object, _Call] = field(default_factory=dict)
    _by_id: dict[str, _Call] = field(default_factory=dict)

    def add_delta(self, delta: dict[str, Any]) -> None:
        """The tool-call pieces of one chunk's delta, whichever way the server sends them."""
        for part in delta.get("tool_calls") or []:
            if isinstance(part, dict):
                self._add(part)
        legacy = delta.get("function_call")
        if isinstance(legacy, dict):
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
        function = part.get("function") if isinstance(part.get("function"), dict) else {}
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
        if arguments is None or arguments == "":
            return
        if not isinstance(arguments, str):
            # A server that sends the arguments as a JSON object rather than its text.
            arguments = json.dumps(arguments)
        if arguments == call.arguments and _is_json(arguments):
            # The whole arguments again (some servers repeat them on the finishing chunk).
            return
        call.arguments += arguments


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
