"""The five memory tools the model may call, bound by the server to the current user.

No tool takes a user, a source or a database id: memories are named by key, the user is
the one whose turn it is, and everything the model writes is `source=coach`. Whatever the
model sends, a call ends in a JSON result it can read (an error included); nothing it
does can raise out of the turn.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, time
from typing import TYPE_CHECKING, Any

import jsonschema
from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from infra.llm import LLMError
from memory.drafts import MemoryDraft, MemoryWriteError, validate_draft
from memory.embeddings import embed_memory, embed_query
from memory.models import (
    SUMMARY_MAX_CHARS,
    Category,
    Memory,
    MemoryEvent,
    MemoryProposal,
    ProspectiveStatus,
    Source,
    Tier,
)
from memory.proposals import proposal_make
from memory.selectors import memories_by_keys, memories_by_similarity, memory_list_for_user
from memory.services import memory_delete, memory_save

if TYPE_CHECKING:
    from accounts.models import User

WRITE_TOOLS = frozenset({"save_memory", "update_memory", "delete_memory"})
RECALL_MAX_KEYS = 10
DEDUP_CANDIDATES = 3
# A date with no time means the morning of that day.
DEFAULT_DUE_TIME = time(9, 0, tzinfo=UTC)


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    nullable = {**schema, "type": [schema["type"], "null"]}
    if "enum" in schema:
        nullable["enum"] = [*schema["enum"], None]
    return nullable


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    # Strict: every property required (optional ones are nullable), nothing else allowed.
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


_KEY = {"type": "string", "description": "Short slug naming the memory, e.g. left-shoulder or talk-june."}
_TIER = {"type": "string", "enum": Tier.values}
_CATEGORY = {"type": "string", "enum": Category.values}
_SUMMARY = {"type": "string", "description": f"One line for the index, at most {SUMMARY_MAX_CHARS} characters."}
_DUE_AT = {"type": "string", "description": "ISO 8601 date or date-time; prospective memories only."}
_REASON = {"type": "string", "description": "Why, in a sentence the person could read."}


def tool_definitions() -> list[dict[str, Any]]:
    """The tools, in the Chat Completions format, with strict JSON schemas."""
    content = {
        "type": "string",
        "description": f"The note itself, at most {settings.MEMORY_CONTENT_MAX_CHARS} characters. "
        "A feedback memory: the rule, then a 'Why:' line and a 'How to apply:' line.",
    }
    specs = {
        "save_memory": (
            "Save something worth remembering about the person, one memory per topic. Saving an existing "
            "key updates it. A save too similar to another memory is refused and the result names it: then "
            "merge into it with update_memory, replace it, or skip.",
            _object(
                {
                    "key": _KEY,
                    "tier": _TIER,
                    "category": _CATEGORY,
                    "summary": _SUMMARY,
                    "content": content,
                    "due_at": _nullable(_DUE_AT),
                }
            ),
        ),
        "update_memory": (
            "Change a memory (merge new detail in, correct it, or mark a prospective memory done). "
            "Null fields stay as they are. Changes to protected memories are sent to the person to confirm.",
            _object(
                {
                    "key": _KEY,
                    "summary": _nullable(_SUMMARY),
                    "content": _nullable(content),
                    "tier": _nullable(_TIER),
                    "category": _nullable(_CATEGORY),
                    "due_at": _nullable(_DUE_AT),
                    "status": _nullable({"type": "string", "enum": ProspectiveStatus.values}),
                    "reason": _REASON,
                }
            ),
        ),
        "delete_memory": (
            "Remove a memory that turned out wrong or no longer applies. "
            "Deleting a protected memory is sent to the person to confirm.",
            _object({"key": _KEY, "reason": _REASON}),
        ),
        "search_memories": (
            "Find the person's memories closest in meaning to a query, with their keys and summaries.",
            _object({"query": {"type": "string"}, "limit": _nullable({"type": "integer"})}),
        ),
        "recall_memory": (
            f"Open full notes by key (from the index), at most {RECALL_MAX_KEYS} at once.",
            _object({"keys": {"type": "array", "items": {"type": "string"}}}),
        ),
    }
    return [
        {
            "type": "function",
            "function": {"name": name, "description": description, "parameters": parameters, "strict": True},
        }
        for name, (description, parameters) in specs.items()
    ]


@dataclass
class ToolContext:
    """One turn's binding: whose memories, where a save came from, and what was done so far."""

    user: User
    session_id: int | None = None
    message_id: int | None = None
    writes: int = 0
    duplicate_keys: set[str] = field(default_factory=set)


class ToolRefusal(Exception):
    """A call the model can correct; the message goes back to it as the result."""


def run_tool(context: ToolContext, name: str, raw_arguments: str) -> str:
    """Apply one tool call and return its result as JSON text for the model."""
    try:
        arguments = _parse_arguments(name, raw_arguments)
        if name in WRITE_TOOLS:
            if context.writes >= settings.MEMORY_MAX_WRITES_PER_TURN:
                raise ToolRefusal(f"at most {settings.MEMORY_MAX_WRITES_PER_TURN} memory writes per turn; stop here")
            context.writes += 1
        result = _HANDLERS[name](context, **arguments)
    except ToolRefusal as refusal:
        result = {"status": "error", "error": str(refusal)}
    except MemoryWriteError as error:
        result = {"status": "error", "error": str(error)}
    except LLMError as error:
        result = {"status": "error", "error": f"memory is unavailable for a moment ({error}); carry on without it"}
    return json.dumps(result, ensure_ascii=False)


def _parse_arguments(name: str, raw_arguments: str) -> dict[str, Any]:
    schemas = {tool["function"]["name"]: tool["function"]["parameters"] for tool in tool_definitions()}
    if name not in schemas:
        raise ToolRefusal(f"there is no tool {name!r}; the tools are {', '.join(schemas)}")
    try:
        arguments = json.loads(raw_arguments or "{}")
    except json.JSONDecodeError as error:
        raise ToolRefusal(f"the arguments are not valid JSON ({error.msg} at character {error.pos})") from None
    try:
        jsonschema.validate(arguments, schemas[name])
    except jsonschema.ValidationError as error:
        raise ToolRefusal(f"the arguments do not match the schema: {error.message}") from None
    return arguments


def _save_memory(
    context: ToolContext,
    *,
    key: str,
    tier: str,
    category: str,
    summary: str,
    content: str,
    due_at: str | None,
) -> dict[str, Any]:
    now = timezone.now()
    draft = validate_draft(
        MemoryDraft(key=key, tier=tier, category=category, summary=summary, content=content, due_at=_due(due_at)),
        now=now,
    )
    existing = memory_list_for_user(user=context.user).filter(key=key).first()
    if existing is not None and existing.is_protected:
        return _propose(context, existing, MemoryProposal.Kind.UPDATE, draft, reason="the coach saved new text")
    embedding = embed_memory(summary=draft.summary, content=draft.content)
    similar = [
        s
        for s in memories_by_similarity(
            user=context.user,
            vector=embedding.vector,
            model=embedding.model,
            limit=DEDUP_CANDIDATES,
            exclude_key=key,
        )
        if s.similarity >= settings.MEMORY_DEDUP_THRESHOLD
    ]
    if similar:
        context.duplicate_keys.update(s.memory.key for s in similar)
        return {
            "status": "not_saved",
            "reason": "too similar to what is already remembered",
            "duplicates": [
                {"key": s.memory.key, "summary": s.memory.summary, "similarity": s.similarity} for s in similar
            ],
            "choices": [
                "merge: update_memory on the existing key with text that combines both",
                "replace: update_memory on the existing key with the new text",
                "skip: nothing new to keep",
            ],
        }
    outcome = memory_save(
        user=context.user,
        draft=draft,
        source=Source.COACH,
        actor=MemoryEvent.Actor.COACH,
        session_id=context.session_id,
        message_id=context.message_id,
        embedding=embedding,
        now=now,
    )
    return {"status": "saved", "key": outcome.memory.key, "created": outcome.created}


def _update_memory(
    context: ToolContext,
    *,
    key: str,
    summary: str | None,
    content: str | None,
    tier: str | None,
    category: str | None,
    due_at: str | None,
    status: str | None,
    reason: str,
) -> dict[str, Any]:
    memory = memory_list_for_user(user=context.user).filter(key=key).first()
    if memory is None:
        raise ToolRefusal(f"there is no memory {key!r}; save_memory creates one")
    current = MemoryDraft.of(memory)
    changes = {"summary": summary, "content": content, "tier": tier, "category": category, "status": status}
    draft = replace(current, **{name: value for name, value in changes.items() if value is not None})
    if due_at is not None:
        draft = replace(draft, due_at=_due(due_at))
    draft = validate_draft(draft, now=timezone.now(), due_may_be_past=due_at is None)
    if draft == current:
        return {"status": "unchanged", "key": key}
    if memory.is_protected:
        return _propose(context, memory, MemoryProposal.Kind.UPDATE, draft, reason=reason)
    memory_save(
        user=context.user,
        draft=draft,
        source=Source.COACH,
        actor=MemoryEvent.Actor.COACH,
        reason=reason,
        merged=key in context.duplicate_keys,
        session_id=context.session_id,
        message_id=context.message_id,
    )
    return {"status": "updated", "key": key}


def _delete_memory(context: ToolContext, *, key: str, reason: str) -> dict[str, Any]:
    memory = memory_list_for_user(user=context.user).filter(key=key).first()
    if memory is None:
        raise ToolRefusal(f"there is no memory {key!r}")
    if memory.is_protected:
        return _propose(context, memory, MemoryProposal.Kind.DELETE, None, reason=reason)
    memory_delete(user=context.user, key=key, actor=MemoryEvent.Actor.COACH, reason=reason)
    return {"status": "deleted", "key": key}


def _search_memories(context: ToolContext, *, query: str, limit: int | None) -> dict[str, Any]:
    if not query.strip():
        raise ToolRefusal("the query is empty")
    limit = max(1, min(limit or settings.MEMORY_SEARCH_LIMIT, settings.MEMORY_SEARCH_LIMIT))
    embedding = embed_query(query)
    found = memories_by_similarity(user=context.user, vector=embedding.vector, model=embedding.model, limit=limit)
    return {
        "status": "found",
        "memories": [
            {
                "key": s.memory.key,
                "tier": s.memory.tier,
                "category": s.memory.category,
                "summary": s.memory.summary,
                "similarity": s.similarity,
            }
            for s in found
        ],
    }


def _recall_memory(context: ToolContext, *, keys: list[str]) -> dict[str, Any]:
    if not keys or len(keys) > RECALL_MAX_KEYS:
        raise ToolRefusal(f"ask for between 1 and {RECALL_MAX_KEYS} keys")
    found = memories_by_keys(user=context.user, keys=keys)
    return {
        "status": "found",
        "memories": [
            {
                "key": m.key,
                "tier": m.tier,
                "category": m.category,
                "written_by": m.get_source_display(),
                "summary": m.summary,
                "content": m.content,
                "due_at": m.due_at.isoformat() if m.due_at else None,
                "status": m.status or None,
                "updated_at": m.updated_at.date().isoformat(),
            }
            for m in found
        ],
        "unknown": [key for key in keys if key not in {m.key for m in found}],
    }


def _propose(
    context: ToolContext, memory: Memory, kind: str, draft: MemoryDraft | None, *, reason: str
) -> dict[str, Any]:
    proposal_make(user=context.user, memory=memory, kind=kind, draft=draft, reason=reason)
    return {
        "status": "proposed",
        "key": memory.key,
        "message": f"{memory.key!r} is protected (the person wrote it, or it concerns their safety). "
        "Nothing changed: the person will be asked to confirm this on their memory page. "
        "Keep treating the memory as it stands.",
    }


def _due(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = parse_datetime(value)
        if parsed is None and (day := parse_date(value)) is not None:
            parsed = datetime.combine(day, DEFAULT_DUE_TIME)
    except ValueError:
        parsed = None
    if parsed is None:
        raise ToolRefusal(f"due_at {value!r} is not an ISO 8601 date or date-time")
    return parsed if timezone.is_aware(parsed) else parsed.replace(tzinfo=UTC)


_HANDLERS = {
    "save_memory": _save_memory,
    "update_memory": _update_memory,
    "delete_memory": _delete_memory,
    "search_memories": _search_memories,
    "recall_memory": _recall_memory,
}
