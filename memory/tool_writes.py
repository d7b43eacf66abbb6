"""The memory tools that write: save (checked against near-copies first), update and
delete. What the person wrote, or anything protected, is never changed by the model: the
call becomes a suggestion the person confirms or rejects."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from infra.llm import Embedding, LLMError
from memory import near_copies
from memory.corrections import changed_by_coach
from memory.drafts import MemoryDraft, feedback_missing, validate_draft
from memory.embeddings import embed_memory, memory_text
from memory.keys import is_neutral
from memory.models import Category, Memory, MemoryEvent, MemoryProposal, Source
from memory.overlaps import overlaps_record
from memory.policy import PROTECTED_CATEGORIES
from memory.proposals import proposal_make
from memory.selectors import SimilarMemory, memories_protected, memory_by_key, memory_by_key_and_similar
from memory.services import WriteOutcome, memory_delete, memory_save
from memory.tool_context import MemoryChange, ToolContext, ToolRefusal, require_memory_on
from memory.tool_embeddings import embedded_alike
from memory.tool_schemas import DEDUP_CANDIDATES, DEFAULT_DUE_TIME

# Neutral keys named when the model asks for a key that is not there.
NEUTRAL_KEYS_SHOWN = 8
# "2027-05": a month, when no day was given.
MONTH = re.compile(r"(?P<year>\d{4})-(?P<month>\d{2})")


def save_memory(
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
    due, month_only = _due(due_at, context.time_zone)
    draft = validate_draft(
        MemoryDraft(
            key=key,
            tier=tier,
            category=category,
            summary=summary,
            content=content,
            due_at=due,
            due_month_only=month_only,
        ),
        now=now,
    )
    _require_a_line_to_read(draft)
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
    embedded_alike(context, embedding.model)
    # Writes check that memory is on as they lock the person's row (memory.store.lock_user).
    existing, nearest = memory_by_key_and_similar(
        user=context.user,
        key=key,
        vector=embedding.vector,
        model=embedding.model,
        text=memory_text(summary=draft.summary, content=draft.content),
        limit=near_copies.CANDIDATES,
        # A weekly episode is the record of a week, which touches on every fact told in
        # it: never the same fact as a note, and never to be merged into.
        exclude_category=Category.EPISODE,
        in_use_only=True,
    )
    if (same := _already_kept(draft, existing, nearest)) is not None:
        # The same save again (a retried turn, a model repeating itself): nothing to
        # record, nothing to show; the model is told as update_memory would tell it.
        return {"status": "unchanged", "key": same.key}
    if existing is not None and (existing.is_protected or _protects(existing, draft)):
        return _propose(context, existing, MemoryProposal.Kind.UPDATE, draft, reason="the coach saved new text")
    # Similarity is a flag, not a verdict: after one, the model may say the facts differ.
    answered = bool(keep_separate) and key in context.flagged_keys
    similar = [] if answered else _nearest_first([s for s in nearest if near_copies.is_near(s.why)])
    if similar and draft.category not in PROTECTED_CATEGORIES:
        return _near_copy(context, key, similar)
    return _saved(context, draft, existing, embedding, similar, now=now)


def _nearest_first(similar: list[SimilarMemory]) -> list[SimilarMemory]:
    return sorted(similar, key=lambda s: -s.similarity)[:DEDUP_CANDIDATES]


def _near_copy(context: ToolContext, key: str, similar: list[SimilarMemory]) -> dict[str, Any]:
    """Not saved yet: the memories it reads like, what matched in each, and the choices,
    none put first: only the model can tell one fact from two."""
    context.duplicate_keys.update(s.memory.key for s in similar)
    context.flagged_keys.add(key)
    return {
        "status": "not_saved",
        "reason": "it shares words and meaning with what is already remembered; it may be the same fact or a "
        "different one",
        "duplicates": [
            {
                "key": s.memory.key,
                "category": s.memory.category,
                "summary": s.memory.summary,
                "similarity": s.similarity,
                "matched": s.why.says(),
            }
            for s in similar
        ],
        "choices": [
            "keep_separate: different facts (a talk in June, another in March): save_memory again with the "
            "same arguments and keep_separate true",
            "merge: the same fact with more detail: update_memory on the existing key, text combining both",
            "replace: the same fact, changed: update_memory on the existing key with the new text",
            "skip: the same fact, nothing new to keep",
        ],
    }


def _saved(
    context: ToolContext,
    draft: MemoryDraft,
    existing: Memory | None,
    embedding: Embedding,
    similar: list[SimilarMemory],
    *,
    now: datetime,
) -> dict[str, Any]:
    with context.writing():
        outcome = _coach_save(
            context, draft, embedding, expected_version=existing.version if existing else None, now=now
        )
        if similar:
            overlaps_record(user=context.user, memory=outcome.memory, similar=similar)
    result: dict[str, Any] = {"status": "saved", "key": outcome.memory.key, "created": outcome.created}
    context.changes.append(
        MemoryChange("saved" if outcome.created else "updated", outcome.memory.pk, outcome.memory.summary)
    )
    if outcome.memory.key != draft.key:
        result["note"] = _renamed(outcome.memory.key)
    if similar:
        # Safety is never held back as a near-copy (seed 000: too much is wasteful, never
        # wrong); the person is offered the pair to merge (recorded above), and the model told of it.
        result["overlaps"] = [{"key": s.memory.key, "summary": s.memory.summary} for s in similar]
        result["overlap_note"] = (
            "saved all the same, as safety notes are never held back; it reads like the memories above, "
            "which the person will be offered to merge"
        )
    return result


def _coach_save(
    context: ToolContext,
    draft: MemoryDraft,
    embedding: Embedding,
    *,
    expected_version: int | None,
    reason: str = "",
    merged: bool = False,
    now: datetime | None = None,
) -> WriteOutcome:
    """memory_save as the coach writes: its own source, from the turn's session and message."""
    return memory_save(
        user=context.user,
        draft=draft,
        source=Source.COACH,
        actor=MemoryEvent.Actor.COACH,
        reason=reason,
        merged=merged,
        session_id=context.session_id,
        message_id=context.message_id,
        embedding=embedding,
        expected_version=expected_version,
        now=now,
    )


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


def update_memory(
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
        require_memory_on(context)
        raise ToolRefusal(_no_such_key(context, key, "save_memory creates one"))
    current = MemoryDraft.of(memory)
    draft = replace(
        current,
        summary=current.summary if summary is None else summary,
        content=current.content if content is None else content,
        tier=current.tier if tier is None else tier,
        category=current.category if category is None else category,
        status=current.status if status is None else status,
    )
    # A new line with the old details kept (or appended to) would tell the coach both facts.
    draft = changed_by_coach(current, draft)
    if due_at is not None:
        if "due_at" in (clear or ()):
            raise ToolRefusal("give due_at or clear it, not both")
        due, month_only = _due(due_at, context.time_zone)
        draft = replace(draft, due_at=due, due_month_only=month_only)
    if "due_at" in (clear or ()):
        draft = replace(draft, due_at=None)
    draft = validate_draft(draft, now=timezone.now(), due_may_be_past=due_at is None)
    if summary is not None:
        _require_a_line_to_read(draft)
    _require_feedback_shape(draft)
    if draft == current:
        return {"status": "unchanged", "key": key}
    if memory.is_protected or _protects(memory, draft):
        return _propose(context, memory, MemoryProposal.Kind.UPDATE, draft, reason=reason)
    # Embedded before the write's transaction opens: no model call holds it.
    embedding = embed_memory(summary=draft.summary, content=draft.content)
    with context.writing():
        outcome = _coach_save(
            context,
            draft,
            embedding,
            expected_version=memory.version,
            reason=reason,
            merged=key in context.duplicate_keys,
        )
    context.changes.append(MemoryChange("updated", outcome.memory.pk, outcome.memory.summary))
    result: dict[str, Any] = {"status": "updated", "key": outcome.memory.key}
    if outcome.memory.key != key:
        result["note"] = _renamed(outcome.memory.key)
    return result


def delete_memory(context: ToolContext, *, key: str, reason: str) -> dict[str, Any]:
    memory = memory_by_key(user=context.user, key=key, in_use_only=True)
    if memory is None:
        require_memory_on(context)
        raise ToolRefusal(_no_such_key(context, key, "nothing was deleted"))
    if memory.is_protected:
        return _propose(context, memory, MemoryProposal.Kind.DELETE, None, reason=reason)
    with context.writing():
        memory_delete(user=context.user, memory_id=memory.pk, actor=MemoryEvent.Actor.COACH, reason=reason)
    context.changes.append(MemoryChange("deleted", memory.pk, memory.summary))
    return {"status": "deleted", "key": key}


def _renamed(key: str) -> str:
    return f"stored as {key!r}, a neutral key, as safety notes and the person's own are: use {key!r} from now on"


def _no_such_key(context: ToolContext, key: str, then: str) -> str:
    """Why a key names nothing, and the keys it may have meant: a safety note, or anything
    the person wrote, is kept under a neutral key (allergy-1), whatever key it was saved as."""
    neutral = [m for m in memories_protected(user=context.user) if is_neutral(m.key)][:NEUTRAL_KEYS_SHOWN]
    said = f"there is no memory {key!r}; {then}"
    if not neutral:
        return f"{said}. The keys are those in your memory block."
    listed = "; ".join(f"{m.key}: {m.summary}" for m in neutral)
    return f"{said}. Safety notes and the person's own are kept under neutral keys: {listed}."


def _protects(memory: Memory, draft: MemoryDraft) -> bool:
    """Whether writing `draft` over the unprotected `memory` would make it protected: the
    person's call, never the coach's (DESIGN.md section 3.1, rule 4), or a model could lock
    the store by reclassifying its own notes into never-evicted ones."""
    return not memory.is_protected and draft.category in PROTECTED_CATEGORIES


# A key as the model writes one (left-shoulder, trip-may): words joined by hyphens.
KEY_LIKE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)+")


def _require_a_line_to_read(draft: MemoryDraft) -> None:
    """The summary is what the person reads of a memory everywhere (their memory page, the
    cue under a reply, what is next to be forgotten): the fact in words, never a key."""
    summary = draft.summary.strip()
    own_key = "-" in draft.key and re.search(rf"(?<![\w-]){re.escape(draft.key)}(?![\w-])", summary, re.IGNORECASE)
    if KEY_LIKE.fullmatch(summary) or summary.casefold() == draft.key.casefold() or own_key:
        raise ToolRefusal(
            f"`summary` is what the person reads, and they never see keys: say the fact itself in words, whole "
            f"(what, which side, where, when), not '{draft.key if own_key else summary}'; save again"
        )


def _require_feedback_shape(draft: MemoryDraft) -> None:
    if missing := feedback_missing(draft):
        raise ToolRefusal(
            "a feedback memory holds the rule, then " + " and ".join(missing) + "; add them to `content` and save again"
        )


def _propose(
    context: ToolContext, memory: Memory, kind: str, draft: MemoryDraft | None, *, reason: str
) -> dict[str, Any]:
    with context.writing():
        proposal_make(user=context.user, memory=memory, kind=kind, draft=draft, reason=reason)
    context.changes.append(MemoryChange("proposed", memory.pk, memory.summary))
    why = (
        "is protected (the person wrote it, or it concerns their safety)"
        if memory.is_protected
        else "would become protected (a safety category), which only the person may decide"
    )
    return {
        "status": "proposed",
        "key": memory.key,
        "message": f"{memory.key!r} {why}. "
        "Nothing changed: the person will be asked to confirm this on their memory page. "
        "Keep treating the memory as it stands.",
    }


def _due(value: str | None, time_zone: str) -> tuple[datetime | None, bool]:
    """An ISO date-time; a date, meaning its morning on the person's clock; or a month
    ("2027-05", when only the month is known), meaning its first morning, said as the month.
    Whether only the month was given, beside it."""
    if value is None:
        return None, False
    zone = ZoneInfo(time_zone)
    if month := MONTH.fullmatch(value.strip()):
        try:
            first = datetime(int(month["year"]), int(month["month"]), 1, DEFAULT_DUE_TIME.hour, tzinfo=zone)
        except ValueError:
            raise ToolRefusal(f"due_at {value!r} is not a month (YYYY-MM)") from None
        return first, True
    try:
        # A plain date first: Python reads "2031-06-12" as a date-time too, at midnight.
        day = parse_date(value)
        parsed = datetime.combine(day, DEFAULT_DUE_TIME, tzinfo=zone) if day else parse_datetime(value)
    except ValueError:
        parsed = None
    if parsed is None:
        raise ToolRefusal(f"due_at {value!r} is not a month (2027-05), a date (2027-05-14) or an ISO 8601 date-time")
    return (parsed if timezone.is_aware(parsed) else parsed.replace(tzinfo=zone)), False
