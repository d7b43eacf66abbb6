"""The five memory tools the model may call, bound by the server to the current person,
and any tool the chat hands the turn beside them (ToolFromAbove: its look-back).

No tool takes a user, a source or a database id: memories are named by key, the person is
the one whose turn it is, and everything the model writes is `source=coach`. Whatever the
model sends, a call ends in a JSON result it can read (an error included); nothing it
does can raise out of the turn. Every text it sends has a length limit.

Where memory is not used (the person turned it off, or the conversation is not
remembered) the model is offered no tools; a call it makes anyway reads and writes
nothing, and its result says memory is off.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import jsonschema
from django.conf import settings

from infra.llm import LLMError
from memory.drafts import MemoryChanged, MemoryNoRoom, MemoryOff, MemoryWriteError

# The turn's binding is the tools' to hand out: callers import it from here.
from memory.tool_context import MemoryChange as MemoryChange
from memory.tool_context import ToolContext as ToolContext
from memory.tool_context import ToolFromAbove as ToolFromAbove
from memory.tool_context import ToolRefusal, memory_as_result
from memory.tool_reads import recall_memory, search_memories
from memory.tool_schemas import WRITE_TOOLS
from memory.tool_schemas import validators as schema_validators
from memory.tool_writes import delete_memory, save_memory, update_memory

# A turn may ask for this many writes per write it is allowed: refusals (near-copies, the
# ceiling) are for the model to answer, within reason.
WRITE_CALLS_PER_WRITE = 3
# The memory tools that embed what they are given (an update too: the memory's text is
# embedded again), as does the chat's look-back; recall and delete need no embedding.
NEEDS_EMBEDDING = frozenset({"save_memory", "update_memory", "search_memories"})


def read_limit_result() -> dict[str, Any]:
    """What the model is told when the turn's searches and recalls are spent: what to do."""
    most = settings.MEMORY_MAX_READS_PER_TURN
    return {
        "status": "read_limit",
        "message": f"Nothing was read: a turn may search or recall at most {most} times, and that is spent. "
        "Answer now with what you found, or ask the person.",
    }


MEMORY_OFF_RESULT = {
    "status": "memory_off",
    "error": "memory is off for this conversation: nothing was read or saved. Answer without memory tools.",
}


def run_tool(context: ToolContext, name: str, raw_arguments: str) -> str:
    """Apply one tool call and return its result as JSON text for the model."""
    # Whether the person has memory on is read with each call's own statements (no query
    # of its own): memory turned off while the model was writing is off for its next call.
    if not context.remembers:
        return json.dumps(MEMORY_OFF_RESULT, ensure_ascii=False)
    if context.embeddings_failed is not None and (name in NEEDS_EMBEDDING or name in context.tools_from_above):
        # Not asked again in this turn: a server that hung once would hang again.
        return json.dumps(_memory_unavailable(name, context.embeddings_failed, earlier=True), ensure_ascii=False)
    try:
        arguments = _parse_arguments(context, name, raw_arguments)
        if name not in WRITE_TOOLS:
            # Every read embeds a query or returns whole notes: bounded per turn, apart from
            # how a search ranks, so no answer of the model's can fan out without end.
            if context.reads >= settings.MEMORY_MAX_READS_PER_TURN:
                return json.dumps(read_limit_result(), ensure_ascii=False)
            context.reads += 1
        if name in context.tools_from_above:
            result = context.tools_from_above[name].run(context, **arguments)
        else:
            result = _memory_tool(context, name, arguments)
    except ToolRefusal as refusal:
        result = {"status": "error", "error": str(refusal)}
    except MemoryOff:
        result = MEMORY_OFF_RESULT
    except MemoryNoRoom as refusal:
        result = {
            "status": "not_saved",
            "reason": str(refusal),
            "choices": [
                "merge: fold this into an existing memory of yours with update_memory",
                "update: change one of your own notes that this supersedes",
                "skip: keep what is remembered as it is",
            ],
        }
    except MemoryChanged as changed:
        result = {
            "status": "changed_meanwhile",
            "message": "Nothing was changed: the memory changed after you read it. Here it is now; "
            "update it again from this if your change still applies.",
            "memory": memory_as_result(changed.memory),
        }
    except MemoryWriteError as error:
        result = {"status": "error", "error": str(error)}
    except LLMError as error:
        # The memory tools ask the model gateway for embeddings only.
        context.embeddings_failed = str(error)
        result = _memory_unavailable(name, str(error), earlier=False)
    return json.dumps(result, ensure_ascii=False)


def _memory_unavailable(name: str, why: str, *, earlier: bool) -> dict[str, Any]:
    """What the model is told when a call could not get its embedding: that nothing was
    written (or found), and what it may do instead."""
    when = "earlier in this turn, so it was not tried again" if earlier else "just now"
    if name in WRITE_TOOLS:
        return {
            "status": "not_saved",
            "reason": f"memory could not be reached {when} ({why}): nothing was saved or changed",
            "choices": [
                "carry on with your reply; what mattered can be saved in a later turn",
                "if the person asked you to remember it, tell them it could not be kept just now",
            ],
        }
    return {
        "status": "unavailable",
        "error": f"memory could not be searched {when} ({why}); answer from what you already know of the person",
    }


def _memory_tool(context: ToolContext, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    if name in WRITE_TOOLS:
        if context.writes >= settings.MEMORY_MAX_WRITES_PER_TURN:
            raise ToolRefusal(f"at most {settings.MEMORY_MAX_WRITES_PER_TURN} memory writes per turn; stop here")
        if context.write_calls >= settings.MEMORY_MAX_WRITES_PER_TURN * WRITE_CALLS_PER_WRITE:
            raise ToolRefusal("too many memory writes asked for in this turn; stop here")
        # Each call embeds the text it writes, whatever becomes of it: bounded too.
        context.write_calls += 1
    result = _HANDLERS[name](context, **arguments)
    if name in WRITE_TOOLS and result.get("status") in _WRITTEN:
        # Only what was applied, or put to the person, spends the budget: a save refused
        # as a near-copy, or one that changed nothing, leaves room for the real one.
        context.writes += 1
    return result


# Results of a write that was applied, or put to the person.
_WRITTEN = frozenset({"saved", "updated", "deleted", "proposed"})
# Results that leave the model nothing to decide.
_SETTLED = _WRITTEN | {"unchanged"}


def settles(result: str) -> bool:
    """Whether a tool's result (as run_tool returned it) is a write that was done: the model
    learns nothing from it that its reply could need. A refusal, an error, a near-copy flag
    or anything read (a search, a recall) is for the model to act on."""
    try:
        status = json.loads(result).get("status")
    except (ValueError, AttributeError):
        return False
    return status in _SETTLED


def _parse_arguments(context: ToolContext, name: str, raw_arguments: str) -> dict[str, Any]:
    validators = {**schema_validators(), **{n: tool.validator for n, tool in context.tools_from_above.items()}}
    if name not in validators:
        raise ToolRefusal(f"there is no tool {name!r}; the tools are {', '.join(validators)}")
    try:
        arguments = json.loads(raw_arguments or "{}")
    except json.JSONDecodeError as error:
        raise ToolRefusal(f"the arguments are not valid JSON ({error.msg} at character {error.pos})") from None
    mismatch = jsonschema.exceptions.best_match(validators[name].iter_errors(arguments))
    if mismatch is not None:
        where = "/".join(str(part) for part in mismatch.absolute_path)
        raise ToolRefusal(f"the arguments do not match the schema{f' at {where}' if where else ''}: {mismatch.message}")
    # Every tool's schema asks for an object: what passed it is one.
    checked: dict[str, Any] = arguments
    return checked


_HANDLERS: dict[str, Callable[..., dict[str, Any]]] = {
    "save_memory": save_memory,
    "update_memory": update_memory,
    "delete_memory": delete_memory,
    "search_memories": search_memories,
    "recall_memory": recall_memory,
}
