"""The memory tools' contract with the model: their names, their strict JSON schemas (what
the model is sent), and the limits checked on what it sends back (every text it sends has
a length limit; strict schemas leave lengths out, so they are checked here, on our side).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import time
from functools import cache
from typing import Any

import jsonschema
from django.conf import settings

from memory.models import KEY_MAX_CHARS, SUMMARY_MAX_CHARS, Category, ProspectiveStatus, Tier
from memory.tool_context import ToolFromAbove

WRITE_TOOLS = frozenset({"save_memory", "update_memory", "delete_memory"})
RECALL_MAX_KEYS = 10
DEDUP_CANDIDATES = 3
REASON_MAX_CHARS = 300
QUERY_MAX_CHARS = 300
DUE_AT_MAX_CHARS = 40
# A date with no time means the morning of that day, on the person's own clock.
DEFAULT_DUE_TIME = time(9, 0)
# Fields update_memory can empty; null means "leave as it is", so emptying is explicit.
CLEARABLE = ("due_at",)


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    nullable = {**schema, "type": [schema["type"], "null"]}
    if "enum" in schema:
        nullable["enum"] = [*schema["enum"], None]
    return nullable


def strict_object(properties: dict[str, Any]) -> dict[str, Any]:
    """A strict schema's object: every property required (optional ones nullable: see
    nullable), nothing else allowed. For the tools the chat hands the turn too."""
    return _object(properties)


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema`, or null: how a strict schema says a property is optional."""
    return _nullable(schema)


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    # Strict: every property required (optional ones are nullable), nothing else allowed.
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


_KEY = {"type": "string", "description": "A short slug naming the topic, never a date: left-shoulder, trip."}
_TIER = {"type": "string", "enum": Tier.values}
# Weekly episodes are written by the app's weekly job alone (memory/episodes.py).
_CATEGORY = {"type": "string", "enum": [c for c in Category.values if c != Category.EPISODE]}
# Written to the person, as everything on their memory page is: one voice, the second person.
_SUMMARY = {
    "type": "string",
    "description": "One line for the index that names the fact itself, with what makes it this fact (what, "
    'which side, where, when, the limit), said to the person: "You have an A2 pulley injury on your left ring '
    'finger: no max hangs", never a topic alone ("Tweaked finger") nor a key; at most '
    f"{SUMMARY_MAX_CHARS} characters.",
}
_DUE_AT = {"type": "string", "description": "A month (2027-05) when no day was given, else a date; prospective only."}
_REASON = {
    "type": "string",
    "description": f"Why, in one sentence to the person, who may see it; at most {REASON_MAX_CHARS} characters.",
}


def tool_definitions(*, from_above: Sequence[ToolFromAbove] = ()) -> list[dict[str, Any]]:
    """The tools, in the Chat Completions format, with strict JSON schemas: the five memory
    tools, then those the chat hands the turn (`from_above`)."""
    specs = {**_write_specs(), **_read_specs()}
    return [
        {
            "type": "function",
            "function": {"name": name, "description": description, "parameters": parameters, "strict": True},
        }
        for name, (description, parameters) in specs.items()
    ] + [tool.definition() for tool in from_above]


def _write_specs() -> dict[str, tuple[str, dict[str, Any]]]:
    content = {
        "type": "string",
        "description": f"The whole fact as it now stands, to the person like the summary, at most "
        f"{settings.MEMORY_CONTENT_MAX_CHARS} characters. Feedback: the rule, then 'Why:' and 'How to apply:' lines.",
    }
    return {
        "save_memory": (
            "Save something worth remembering, one memory per topic. A save close to an existing memory is "
            "flagged, not saved: the result says what matched. A protected memory gets a neutral key "
            "(allergy-1), given in the result.",
            _object(
                {
                    "key": _KEY,
                    "tier": _TIER,
                    "category": _CATEGORY,
                    "summary": _SUMMARY,
                    "content": content,
                    "due_at": _nullable(_DUE_AT),
                    "keep_separate": _nullable(
                        {
                            "type": "boolean",
                            "description": "true only after a flag on this key in this turn: the facts differ.",
                        }
                    ),
                }
            ),
        ),
        "update_memory": (
            "Change a memory: new detail, a correction (the new fact replaces the old), or an intention "
            "done. Null fields stay as they are; list in `clear` the fields to empty. A protected memory's "
            "change goes to the person to confirm.",
            _object(
                {
                    "key": _KEY,
                    "summary": _nullable(_SUMMARY),
                    "content": _nullable(content),
                    "tier": _nullable(_TIER),
                    "category": _nullable(_CATEGORY),
                    "due_at": _nullable(_DUE_AT),
                    "status": _nullable({"type": "string", "enum": ProspectiveStatus.values}),
                    "clear": _nullable({"type": "array", "items": {"type": "string", "enum": list(CLEARABLE)}}),
                    "reason": _REASON,
                }
            ),
        ),
        "delete_memory": (
            "Remove a memory that is wrong or no longer applies. "
            "Deleting a protected memory goes to the person to confirm.",
            _object({"key": _KEY, "reason": _REASON}),
        ),
    }


def _read_specs() -> dict[str, tuple[str, dict[str, Any]]]:
    return {
        "search_memories": (
            "Find the person's memories by words or meaning, best first, with their keys, summaries and what "
            "matched; not for what your memory block shows.",
            _object({"query": {"type": "string"}, "limit": _nullable({"type": "integer"})}),
        ),
        "recall_memory": (
            f"Open full notes by key, as the memory block lists them, at most {RECALL_MAX_KEYS} at once.",
            _object({"keys": {"type": "array", "items": {"type": "string"}}}),
        ),
    }


@cache
def validators() -> dict[str, jsonschema.protocols.Validator]:
    """One compiled validator per tool, made once. What the model is sent stays within
    what strict schemas allow; the limits on length are checked here, on our side."""
    limits = {
        "key": {"maxLength": KEY_MAX_CHARS},
        "summary": {"maxLength": SUMMARY_MAX_CHARS * 4},
        "content": {"maxLength": settings.MEMORY_CONTENT_MAX_CHARS * 2},
        "due_at": {"maxLength": DUE_AT_MAX_CHARS},
        "reason": {"maxLength": REASON_MAX_CHARS},
        "query": {"maxLength": QUERY_MAX_CHARS},
        "keys": {"maxItems": RECALL_MAX_KEYS * 5, "items": {"type": "string", "maxLength": KEY_MAX_CHARS}},
        "limit": {"minimum": 1, "maximum": 1000},
    }
    validators: dict[str, jsonschema.protocols.Validator] = {}
    for tool in tool_definitions():
        schema = json.loads(json.dumps(tool["function"]["parameters"]))
        for property_name, extra in limits.items():
            if property_name in schema["properties"]:
                schema["properties"][property_name] |= extra
        validators[tool["function"]["name"]] = jsonschema.Draft202012Validator(schema)
    return validators
