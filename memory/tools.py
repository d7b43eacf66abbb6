"""The five memory tools the model may call, bound by the server to the current person.

No tool takes a user, a source or a database id: memories are named by key, the person is
the one whose turn it is, and everything the model writes is `source=coach`. Whatever the
model sends, a call ends in a JSON result it can read (an error included); nothing it
does can raise out of the turn. Every text it sends has a length limit.

Where memory is not used (the person turned it off, or the conversation is not
remembered) the model is offered no tools; a call it makes anyway reads and writes
nothing, and its result says memory is off.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import jsonschema
from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from infra.llm import LLMError
from memory.drafts import (
    MemoryChanged,
    MemoryDraft,
    MemoryNoRoom,
    MemoryOff,
    MemoryWriteError,
    feedback_missing,
    validate_draft,
)
from memory.embeddings import embed_memory, embed_query
from memory.models import (
    Category,
    Memory,
    MemoryEvent,
    MemoryProposal,
    Source,
    author_for_model,
)
from memory.overlaps import overlaps_record
from memory.policy import PROTECTED_CATEGORIES
from memory.proposals import proposal_make
from memory.selectors import (
    SimilarMemory,
    memories_by_keys,
    memories_by_similarity,
    memories_of_another_model,
    memory_by_key,
    memory_by_key_and_similar,
)
from memory.services import memories_reembed, memory_delete, memory_save
from memory.tool_schemas import (
    DEDUP_CANDIDATES,
    DEFAULT_DUE_TIME,
    RECALL_MAX_KEYS,
    WRITE_TOOLS,
)
from memory.tool_schemas import validators as schema_validators

if TYPE_CHECKING:
    from accounts.models import User


@dataclass(frozen=True)
class MemoryChange:
    """What a tool call did to the person's memory, for the chat's quiet cue."""

    action: str  # "saved", "updated", "proposed" or "deleted"
    memory_id: int
    summary: str

    def cue(self) -> dict[str, Any]:
        return {"action": self.action, "memory_id": self.memory_id, "summary": self.summary}


@dataclass
class ToolContext:
    """One turn's binding: whose memories, their clock, where a save came from, and what
    was done so far."""

    user: User
    time_zone: str = "UTC"
    # False for a conversation that is not remembered: every call is refused.
    remembers: bool = True
    session_id: int | None = None
    message_id: int | None = None
    # Writes applied (or put to the person) in this turn, and write calls made at all.
    writes: int = 0
    write_calls: int = 0
    duplicate_keys: set[str] = field(default_factory=set)
    # Keys whose save was flagged as a near-copy in this turn: keep_separate applies to them.
    flagged_keys: set[str] = field(default_factory=set)
    # What the turn's calls did, in order, for the chat to show quietly.
    changes: list[MemoryChange] = field(default_factory=list)
    # The embedding model the person's memories were last found (or brought) up to.
    embedded_by: str | None = None


class ToolRefusal(Exception):
    """A call the model can correct; the message goes back to it as the result."""


# A turn may ask for this many writes per write it is allowed: refusals (near-copies, the
# ceiling) are for the model to answer, within reason.
WRITE_CALLS_PER_WRITE = 3

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
    try:
        arguments = _parse_arguments(name, raw_arguments)
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
            "memory": _full(changed.memory),
        }
    except MemoryWriteError as error:
        result = {"status": "error", "error": str(error)}
    except LLMError as error:
        result = {"status": "error", "error": f"memory is unavailable for a moment ({error}); carry on without it"}
    return json.dumps(result, ensure_ascii=False)


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


def _require_memory_on(context: ToolContext) -> None:
    """Where a read found nothing: it reads nothing while memory is off, so say which it was."""
    if not get_user_model().objects.filter(pk=context.user.pk, memory_enabled=True).exists():
        raise MemoryOff("memory is off")


def _parse_arguments(name: str, raw_arguments: str) -> dict[str, Any]:
    validators = schema_validators()
    if name not in validators:
        raise ToolRefusal(f"there is no tool {name!r}; the tools are {', '.join(validators)}")
    try:
        arguments = json.loads(raw_arguments or "{}")
    except json.JSONDecodeError as error:
        raise ToolRefusal(f"the arguments are not valid JSON ({error.msg} at character {error.pos})") from None
    error = jsonschema.exceptions.best_match(validators[name].iter_errors(arguments))
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path)
        raise ToolRefusal(f"the arguments do not match the schema{f' at {where}' if where else ''}: {error.message}")
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
    keep_separate: bool | None,
) -> dict[str, Any]:
    now = timezone.now()
    draft = validate_draft(
        MemoryDraft(
            key=key,
            tier=tier,
            category=category,
            summary=summary,
            content=content,
            due_at=_due(due_at, context.time_zone),
        ),
        now=now,
    )
    _require_feedback_shape(draft)
    # Embedded first, so that the memory under this key and those like it are one read (a
    # save that ends as a proposal to the person spends an embedding for nothing: rare).
    try:
        embedding = embed_memory(summary=draft.summary, content=draft.content)
    except LLMError:
        # A change to a protected memory is put to the person, which needs no embedding:
        # an outage does not stop it.
        existing = memory_by_key(user=context.user, key=key, in_use_only=True)
        if existing is not None and existing.is_protected:
            return _propose(context, existing, MemoryProposal.Kind.UPDATE, draft, reason="the coach saved new text")
        raise
    _embedded_alike(context, embedding.model)
    # Writes check that memory is on as they lock the person's row (memory.store.lock_user).
    existing, nearest = memory_by_key_and_similar(
        user=context.user,
        key=key,
        vector=embedding.vector,
        model=embedding.model,
        limit=DEDUP_CANDIDATES,
        # A weekly episode is the record of a week, which touches on every fact told in
        # it: never the same fact as a note, and never to be merged into.
        exclude_category=Category.EPISODE,
        in_use_only=True,
    )
    if (same := _already_kept(draft, existing, nearest)) is not None:
        # The same save again (a retried turn, a model repeating itself): nothing to
        # record, nothing to show; the model is told as update_memory would tell it.
        return {"status": "unchanged", "key": same.key}
    if existing is not None and existing.is_protected:
        return _propose(context, existing, MemoryProposal.Kind.UPDATE, draft, reason="the coach saved new text")
    safety = draft.category in PROTECTED_CATEGORIES
    # Similarity is a flag, not a verdict: after one, the model may say the facts differ.
    answered = bool(keep_separate) and key in context.flagged_keys
    similar = [] if answered else [s for s in nearest if s.similarity >= settings.MEMORY_DEDUP_THRESHOLD]
    if similar and not safety:
        context.duplicate_keys.update(s.memory.key for s in similar)
        context.flagged_keys.add(key)
        return {
            "status": "not_saved",
            "reason": "it looks like what is already remembered",
            "duplicates": [
                {
                    "key": s.memory.key,
                    "category": s.memory.category,
                    "summary": s.memory.summary,
                    "similarity": s.similarity,
                }
                for s in similar
            ],
            "choices": [
                "merge: the same fact with more detail: update_memory on the existing key, text combining both",
                "replace: the same fact, changed: update_memory on the existing key with the new text",
                "skip: nothing new to keep",
                "keep_separate: different facts (a talk in June, another in March): save_memory again with the "
                "same arguments and keep_separate true",
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
        expected_version=existing.version if existing else None,
        now=now,
    )
    result: dict[str, Any] = {"status": "saved", "key": outcome.memory.key, "created": outcome.created}
    context.changes.append(
        MemoryChange("saved" if outcome.created else "updated", outcome.memory.pk, outcome.memory.summary)
    )
    if outcome.memory.key != key:
        result["note"] = f"kept under the neutral key {outcome.memory.key!r}: safety notes are never named by text"
    if similar:
        # Safety is never held back as a near-copy (seed 000: too much is wasteful, never
        # wrong); the person is offered the pair to merge, and the model told of it.
        overlaps_record(user=context.user, memory=outcome.memory, similar=similar)
        result["overlaps"] = [{"key": s.memory.key, "summary": s.memory.summary} for s in similar]
        result["overlap_note"] = (
            "saved all the same, as safety notes are never held back; it reads like the memories above, "
            "which the person will be offered to merge"
        )
    return result


def _embedded_alike(context: ToolContext, model: str) -> None:
    """Before a near-copy check or a search, which compare embeddings of one model: the
    person's memories embedded by another (EMBEDDING_MODEL changed, and the hourly
    re-embedding has not reached them yet) are embedded again now, so that the check sees
    every memory. Cheaper than embedding each new text with every older model too, which
    may not even be served any more: once per person, not once per save. Looked at once a
    turn: what the turn saves itself is embedded by `model`."""
    if context.embedded_by == model:
        return
    context.embedded_by = model
    user = context.user
    if memories_of_another_model(user=user, model=model):
        # If the model fails now, the check goes on with what it can compare; the hourly
        # job tries again.
        with contextlib.suppress(LLMError):
            memories_reembed(user=user)


def _already_kept(draft: MemoryDraft, existing: Memory | None, nearest: list[SimilarMemory]) -> Memory | None:
    """The memory that already holds exactly this draft: the one under its key, or (a safety
    note is kept under a neutral key, so a second save of it finds no key) the closest
    memory the coach wrote, when its text, kind and dates are the draft's own. What the
    person wrote is never taken for the coach's own save: a copy of it is offered to them
    to merge, as any look-alike is."""
    candidates = [existing] if existing is not None else []
    candidates += [match.memory for match in nearest[:1]]
    for memory in candidates:
        # A match is read without its note: the summary rules most out before it is loaded.
        if (memory.tier, memory.category, memory.summary) != (draft.tier, draft.category, draft.summary):
            continue
        if memory is not existing and memory.source != Source.COACH:
            continue
        if replace(MemoryDraft.of(memory), key=draft.key) == draft:
            return memory
    return None


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
    clear: list[str] | None,
    reason: str,
) -> dict[str, Any]:
    memory = memory_by_key(user=context.user, key=key, in_use_only=True)
    if memory is None:
        _require_memory_on(context)
        raise ToolRefusal(f"there is no memory {key!r}; save_memory creates one")
    current = MemoryDraft.of(memory)
    changes = {"summary": summary, "content": content, "tier": tier, "category": category, "status": status}
    draft = replace(current, **{name: value for name, value in changes.items() if value is not None})
    if due_at is not None:
        if "due_at" in (clear or ()):
            raise ToolRefusal("give due_at or clear it, not both")
        draft = replace(draft, due_at=_due(due_at, context.time_zone))
    if "due_at" in (clear or ()):
        draft = replace(draft, due_at=None)
    draft = validate_draft(draft, now=timezone.now(), due_may_be_past=due_at is None)
    _require_feedback_shape(draft)
    if draft == current:
        return {"status": "unchanged", "key": key}
    if memory.is_protected:
        return _propose(context, memory, MemoryProposal.Kind.UPDATE, draft, reason=reason)
    outcome = memory_save(
        user=context.user,
        draft=draft,
        source=Source.COACH,
        actor=MemoryEvent.Actor.COACH,
        reason=reason,
        merged=key in context.duplicate_keys,
        session_id=context.session_id,
        message_id=context.message_id,
        expected_version=memory.version,
    )
    context.changes.append(MemoryChange("updated", outcome.memory.pk, outcome.memory.summary))
    result: dict[str, Any] = {"status": "updated", "key": outcome.memory.key}
    if outcome.memory.key != key:
        result["note"] = f"now protected, so kept under the neutral key {outcome.memory.key!r}"
    return result


def _delete_memory(context: ToolContext, *, key: str, reason: str) -> dict[str, Any]:
    memory = memory_by_key(user=context.user, key=key, in_use_only=True)
    if memory is None:
        _require_memory_on(context)
        raise ToolRefusal(f"there is no memory {key!r}")
    if memory.is_protected:
        return _propose(context, memory, MemoryProposal.Kind.DELETE, None, reason=reason)
    memory_delete(user=context.user, memory_id=memory.pk, actor=MemoryEvent.Actor.COACH, reason=reason)
    context.changes.append(MemoryChange("deleted", memory.pk, memory.summary))
    return {"status": "deleted", "key": key}


def _search_memories(context: ToolContext, *, query: str, limit: int | None) -> dict[str, Any]:
    if not query.strip():
        raise ToolRefusal("the query is empty")
    limit = max(1, min(limit or settings.MEMORY_SEARCH_LIMIT, settings.MEMORY_SEARCH_LIMIT))
    embedding = embed_query(query)
    _embedded_alike(context, embedding.model)
    found = memories_by_similarity(
        user=context.user, vector=embedding.vector, model=embedding.model, limit=limit, in_use_only=True
    )
    if not found:
        _require_memory_on(context)
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
    found = memories_by_keys(user=context.user, keys=keys, in_use_only=True)
    if not found:
        _require_memory_on(context)
    return {
        "status": "found",
        "memories": [_full(m) for m in found],
        "unknown": [key for key in keys if key not in {m.key for m in found}],
    }


def _full(memory: Memory) -> dict[str, Any]:
    return {
        "key": memory.key,
        "tier": memory.tier,
        "category": memory.category,
        "written_by": author_for_model(memory.source),
        "summary": memory.summary,
        "content": memory.content,
        "due_at": memory.due_at.isoformat() if memory.due_at else None,
        "status": memory.status or None,
        "updated_at": memory.updated_at.date().isoformat(),
    }


def _require_feedback_shape(draft: MemoryDraft) -> None:
    if missing := feedback_missing(draft):
        raise ToolRefusal(
            "a feedback memory holds the rule, then " + " and ".join(missing) + "; add them to `content` and save again"
        )


def _propose(
    context: ToolContext, memory: Memory, kind: str, draft: MemoryDraft | None, *, reason: str
) -> dict[str, Any]:
    proposal_make(user=context.user, memory=memory, kind=kind, draft=draft, reason=reason)
    context.changes.append(MemoryChange("proposed", memory.pk, memory.summary))
    return {
        "status": "proposed",
        "key": memory.key,
        "message": f"{memory.key!r} is protected (the person wrote it, or it concerns their safety). "
        "Nothing changed: the person will be asked to confirm this on their memory page. "
        "Keep treating the memory as it stands.",
    }


def _due(value: str | None, time_zone: str) -> datetime | None:
    """An ISO date-time, or a date meaning its morning on the person's clock."""
    if value is None:
        return None
    zone = ZoneInfo(time_zone)
    try:
        # A plain date first: Python reads "2031-06-12" as a date-time too, at midnight.
        day = parse_date(value)
        parsed = datetime.combine(day, DEFAULT_DUE_TIME, tzinfo=zone) if day else parse_datetime(value)
    except ValueError:
        parsed = None
    if parsed is None:
        raise ToolRefusal(f"due_at {value!r} is not an ISO 8601 date or date-time")
    return parsed if timezone.is_aware(parsed) else parsed.replace(tzinfo=zone)


_HANDLERS = {
    "save_memory": _save_memory,
    "update_memory": _update_memory,
    "delete_memory": _delete_memory,
    "search_memories": _search_memories,
    "recall_memory": _recall_memory,
}
