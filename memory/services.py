"""Writing memories.

Every change runs in one transaction with the user's row locked, applies the eviction
policy in that same transaction, and appends a MemoryEvent; so the ceiling is an
invariant, not an eventual state, even with concurrent writers. Embeddings are computed
before a transaction opens: no model call ever holds a lock.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.text import slugify

from accounts.models import User
from coach import llm
from coach.llm import Embedding
from memory.embeddings import embed_memory, memory_text
from memory.models import (
    KEY_MAX_CHARS,
    SUMMARY_MAX_CHARS,
    Category,
    Memory,
    MemoryEvent,
    MemoryProposal,
    ProspectiveStatus,
    Source,
    Tier,
)
from memory.policy import Eviction, plan_eviction
from memory.selectors import memory_facts_for_user

KEY_PATTERN = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
# Leaves room for a "-2" suffix within KEY_MAX_CHARS when the same words are added twice.
_ADDED_KEY_MAX_CHARS = 40
Actor = MemoryEvent.Actor


class MemoryWriteError(Exception):
    """A write that cannot be made; the message is fit to show the writer."""


class MemoryInvalid(MemoryWriteError):
    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{field}: {message}" for field, message in errors.items()))
        self.errors = errors


class MemoryNotFound(MemoryWriteError):
    pass


class MemoryIsProtected(MemoryWriteError):
    """The coach tried to rewrite or delete a memory only the user may change."""


class ProposalOutdated(MemoryWriteError):
    pass


class MemoryNotRestorable(MemoryWriteError):
    """A forgotten memory that cannot come back: too old, already back, or its key taken."""


@dataclass(frozen=True)
class MemoryDraft:
    """A memory's fields as a writer wants them."""

    key: str
    tier: str
    category: str
    summary: str
    content: str
    due_at: datetime | None = None
    status: str = ""

    def to_json(self) -> str:
        return json.dumps(
            {
                "key": self.key,
                "tier": self.tier,
                "category": self.category,
                "summary": self.summary,
                "content": self.content,
                "due_at": self.due_at.isoformat() if self.due_at else None,
                "status": self.status,
            }
        )

    @classmethod
    def from_fields(cls, fields: dict[str, Any]) -> MemoryDraft:
        return cls(
            key=fields["key"],
            tier=fields["tier"],
            category=fields["category"],
            summary=fields["summary"],
            content=fields["content"],
            due_at=parse_datetime(fields["due_at"]) if fields.get("due_at") else None,
            status=fields.get("status") or "",
        )

    @classmethod
    def of(cls, memory: Memory) -> MemoryDraft:
        return cls(
            key=memory.key,
            tier=memory.tier,
            category=memory.category,
            summary=memory.summary,
            content=memory.content,
            due_at=memory.due_at,
            status=memory.status,
        )


@dataclass(frozen=True)
class WriteOutcome:
    memory: Memory
    created: bool
    evicted: tuple[Eviction, ...] = ()


def validate_draft(draft: MemoryDraft, *, now: datetime, due_may_be_past: bool = False) -> MemoryDraft:
    """The draft with its text tidied, or MemoryInvalid naming every problem."""
    draft = replace(
        draft, key=draft.key.strip(), summary=" ".join(draft.summary.split()), content=draft.content.strip()
    )
    errors: dict[str, str] = {}
    if not KEY_PATTERN.match(draft.key) or len(draft.key) > KEY_MAX_CHARS:
        errors["key"] = f"use lowercase words joined by hyphens, at most {KEY_MAX_CHARS} characters"
    if draft.tier not in Tier.values:
        errors["tier"] = f"must be one of {', '.join(Tier.values)}"
    if draft.category not in Category.values:
        errors["category"] = f"must be one of {', '.join(Category.values)}"
    if not draft.summary:
        errors["summary"] = "must not be empty"
    elif len(draft.summary) > SUMMARY_MAX_CHARS:
        errors["summary"] = f"is {len(draft.summary)} characters; at most {SUMMARY_MAX_CHARS}"
    if not draft.content:
        draft = replace(draft, content=draft.summary)
    elif len(draft.content) > settings.MEMORY_CONTENT_MAX_CHARS:
        errors["content"] = f"is {len(draft.content)} characters; at most {settings.MEMORY_CONTENT_MAX_CHARS}"
    if draft.tier == Tier.PROSPECTIVE:
        if draft.due_at is None:
            errors["due_at"] = "a prospective memory needs the date to bring it up"
        elif timezone.is_naive(draft.due_at):
            errors["due_at"] = "give a time zone (for example 2026-06-01T09:00:00Z)"
        elif draft.due_at <= now and not due_may_be_past:
            errors["due_at"] = "is in the past; a prospective memory is about something still to come"
        if draft.status not in ProspectiveStatus.values:
            draft = replace(draft, status=ProspectiveStatus.OPEN)
    else:
        if draft.due_at is not None:
            errors["due_at"] = "only prospective memories have a due date"
        draft = replace(draft, status="")
    if errors:
        raise MemoryInvalid(errors)
    return draft


def memory_save(
    *,
    user: User,
    draft: MemoryDraft,
    source: str,
    actor: str,
    reason: str = "",
    merged: bool = False,
    session_id: int | None = None,
    message_id: int | None = None,
    embedding: Embedding | None = None,
    now: datetime | None = None,
) -> WriteOutcome:
    """Create the memory named `draft.key`, or update it (an upsert by key).

    The coach may create a protected memory (an allergy mentioned in passing) but never
    rewrite one: that must go through a proposal. `merged` records an update that folds a
    near-duplicate in. Evictions the policy asks for are made in the same transaction.
    """
    now = now or timezone.now()
    draft = validate_draft(draft, now=now)
    if embedding is None:
        embedding = embed_memory(summary=draft.summary, content=draft.content)
    with transaction.atomic():
        _lock_user(user)
        memory = Memory.objects.select_for_update().filter(user=user, key=draft.key).first()
        if memory is None:
            memory = Memory(user=user, key=draft.key, source=source, created_at=now, version=0)
            before, action = None, MemoryEvent.Action.CREATED
        else:
            if actor == Actor.COACH and memory.is_protected:
                raise MemoryIsProtected(f"'{memory.key}' is protected: the coach may only propose a change")
            before = memory.snapshot()
            action = MemoryEvent.Action.MERGED if merged else MemoryEvent.Action.UPDATED
            if source != Source.COACH:
                memory.source = source
        _apply(memory, draft, embedding=embedding, now=now)
        if session_id is not None:
            memory.session_id, memory.message_id = session_id, message_id
        memory.save()
        _record(memory, actor=actor, action=action, reason=reason, before=before, after=memory.snapshot(), now=now)
        evicted = _apply_eviction_policy(user=user, now=now)
    return WriteOutcome(memory=memory, created=before is None, evicted=evicted)


def memory_edit_by_user(
    *, user: User, key: str, draft: MemoryDraft, expected_version: int | None = None, now: datetime | None = None
) -> Memory:
    """A person's own correction: re-embeds once if the text changed, and makes the memory
    `manual`, hence protected, whoever wrote it first."""
    now = now or timezone.now()
    draft = validate_draft(replace(draft, key=key), now=now, due_may_be_past=True)
    current = Memory.objects.filter(user=user, key=key).first()
    if current is None:
        raise MemoryNotFound("This memory is gone: it was deleted or forgotten meanwhile.")
    text_changed = (draft.summary, draft.content) != (current.summary, current.content)
    stale = current.embedding is None or current.embedding_model != settings.EMBEDDING_MODEL
    embedding = embed_memory(summary=draft.summary, content=draft.content) if text_changed or stale else None
    with transaction.atomic():
        _lock_user(user)
        memory = Memory.objects.select_for_update().filter(user=user, key=key).first()
        if memory is None:
            raise MemoryNotFound("This memory is gone: it was deleted or forgotten meanwhile.")
        if expected_version is not None and memory.version != expected_version:
            raise ProposalOutdated("This memory changed while you were editing it; review it and try again.")
        before = memory.snapshot()
        memory.source = Source.MANUAL
        _apply(memory, draft, embedding=embedding, now=now)
        memory.save()
        _record(
            memory, actor=Actor.USER, action=MemoryEvent.Action.UPDATED, before=before, after=memory.snapshot(), now=now
        )
    return memory


def memory_delete(*, user: User, key: str, actor: str, reason: str = "", now: datetime | None = None) -> None:
    """Delete a memory and its embedding. When the user deletes, the text of its history
    is blanked too: what they asked to be forgotten is not kept anywhere."""
    now = now or timezone.now()
    with transaction.atomic():
        _lock_user(user)
        memory = Memory.objects.select_for_update().filter(user=user, key=key).first()
        if memory is None:
            raise MemoryNotFound(f"There is no memory '{key}'.")
        if actor == Actor.COACH and memory.is_protected:
            raise MemoryIsProtected(f"'{key}' is protected: the coach may only propose deleting it")
        if actor == Actor.USER:
            _erase_for_user(memory, action=MemoryEvent.Action.DELETED, now=now)
        else:
            snapshot = memory.snapshot()
            _record(memory, actor=actor, action=MemoryEvent.Action.DELETED, reason=reason, before=snapshot, now=now)
            memory.delete()


def memory_delete_all(*, user: User) -> int:
    """Forget everything about the user, history text included. Returns how many went."""
    with transaction.atomic():
        _lock_user(user)
        count = Memory.objects.filter(user=user).count()
        MemoryProposal.objects.filter(user=user).delete()
        MemoryEvent.objects.filter(user=user).delete()
        Memory.objects.filter(user=user).delete()
    return count


def proposal_make(*, user: User, memory: Memory, kind: str, draft: MemoryDraft | None, reason: str) -> MemoryProposal:
    """Ask the user to confirm a change the coach may not make itself."""
    proposed = draft.to_json() if draft is not None else None
    with transaction.atomic():
        _lock_user(user)
        pending = MemoryProposal.objects.filter(
            user=user, memory=memory, kind=kind, status=MemoryProposal.Status.PENDING
        )
        for existing in pending:
            if existing.proposed == proposed:
                return existing
        proposal = MemoryProposal.objects.create(
            user=user, memory=memory, kind=kind, proposed=proposed, reason=reason, base_version=memory.version
        )
        _record(
            memory,
            actor=Actor.COACH,
            action=MemoryEvent.Action.PROPOSAL_MADE,
            reason=reason,
            before=memory.snapshot(),
            after=proposed,
        )
    return proposal


def proposal_confirm(*, user: User, proposal_id: int, now: datetime | None = None) -> Memory | None:
    """Apply exactly the change the user was shown; refuse if the memory changed since.
    Returns the updated memory, or None when the proposal deleted it."""
    now = now or timezone.now()
    proposal = MemoryProposal.objects.select_related("memory").get(
        user=user, pk=proposal_id, status=MemoryProposal.Status.PENDING
    )
    draft = MemoryDraft.from_fields(proposal.proposed_fields()) if proposal.kind == MemoryProposal.Kind.UPDATE else None
    if draft is not None:
        draft = validate_draft(draft, now=now, due_may_be_past=True)
    embedding = embed_memory(summary=draft.summary, content=draft.content) if draft is not None else None
    with transaction.atomic():
        _lock_user(user)
        proposal = MemoryProposal.objects.select_for_update().get(pk=proposal.pk, status=MemoryProposal.Status.PENDING)
        memory = Memory.objects.select_for_update().get(pk=proposal.memory_id)
        if memory.version != proposal.base_version:
            raise ProposalOutdated(
                "This memory changed after your coach suggested the change; the suggestion no longer applies."
            )
        proposal.status, proposal.decided_at = MemoryProposal.Status.CONFIRMED, now
        proposal.save(update_fields=["status", "decided_at"])
        before = memory.snapshot()
        if draft is None:
            _erase_for_user(memory, action=MemoryEvent.Action.PROPOSAL_CONFIRMED, now=now)
            return None
        memory.source = Source.MANUAL
        _apply(memory, draft, embedding=embedding, now=now)
        memory.save()
        _record(
            memory,
            actor=Actor.USER,
            action=MemoryEvent.Action.PROPOSAL_CONFIRMED,
            before=before,
            after=memory.snapshot(),
            now=now,
        )
    return memory


def proposal_reject(*, user: User, proposal_id: int, now: datetime | None = None) -> None:
    now = now or timezone.now()
    with transaction.atomic():
        proposal = MemoryProposal.objects.select_for_update().get(
            user=user, pk=proposal_id, status=MemoryProposal.Status.PENDING
        )
        proposal.status, proposal.decided_at = MemoryProposal.Status.REJECTED, now
        proposal.save(update_fields=["status", "decided_at"])
        _record(proposal.memory, actor=Actor.USER, action=MemoryEvent.Action.PROPOSAL_REJECTED, now=now)


def memory_add_by_user(*, user: User, draft: MemoryDraft, now: datetime | None = None) -> Memory:
    """A memory the user typed ("always remember this"), under a key of its own.

    The key is derived from `draft.key` (or the summary when blank) and made free inside
    the user's lock, so an addition never overwrites an existing memory of the same name.
    """
    now = now or timezone.now()
    wanted = _key_from(draft.key or draft.summary)
    draft = validate_draft(replace(draft, key=wanted), now=now)
    embedding = embed_memory(summary=draft.summary, content=draft.content)
    with transaction.atomic():
        _lock_user(user)
        draft = replace(draft, key=_free_key(user, wanted))
        outcome = memory_save(
            user=user, draft=draft, source=Source.USER, actor=Actor.USER, embedding=embedding, now=now
        )
    return outcome.memory


def memory_keep(*, user: User, key: str, now: datetime | None = None) -> Memory:
    """Protect a memory as it stands: it becomes `manual`, so the policy never evicts it.
    Its text is unchanged, so no embedding call is made."""
    now = now or timezone.now()
    with transaction.atomic():
        _lock_user(user)
        memory = Memory.objects.select_for_update().filter(user=user, key=key).first()
        if memory is None:
            raise MemoryNotFound("This memory is gone: it was deleted or forgotten meanwhile.")
        if memory.source == Source.MANUAL:
            return memory
        before = memory.snapshot()
        memory.source = Source.MANUAL
        memory.version += 1
        memory.updated_at = now
        memory.save(update_fields=["source", "version", "updated_at"])
        _record(
            memory,
            actor=Actor.USER,
            action=MemoryEvent.Action.UPDATED,
            reason="you chose to keep it",
            before=before,
            after=memory.snapshot(),
            now=now,
        )
    return memory


def memory_restore(*, user: User, event_id: int, now: datetime | None = None) -> Memory:
    """Bring back a memory the eviction policy removed, from the snapshot in its `evicted`
    event. It returns as `manual`, so protected: the user chose to keep it this time.

    A prospective memory whose date has passed meanwhile is restored all the same (its
    status kept): refusing would lose it for good, and the person can then edit the date
    or mark it done. The policy runs after the insert like any save; the restored memory
    is protected, so it is never the one that goes.
    """
    now = now or timezone.now()
    event = MemoryEvent.objects.filter(user=user, pk=event_id, action=MemoryEvent.Action.EVICTED).first()
    if event is None or not event.before:
        raise MemoryNotRestorable("There is no forgotten memory here to restore.")
    if event.created_at < now - timedelta(days=settings.MEMORY_FORGOTTEN_DAYS):
        raise MemoryNotRestorable(
            f"This memory was forgotten more than {settings.MEMORY_FORGOTTEN_DAYS} days ago; "
            "it can no longer be restored."
        )
    draft = validate_draft(MemoryDraft.from_fields(event.before_fields()), now=now, due_may_be_past=True)
    embedding = embed_memory(summary=draft.summary, content=draft.content)
    with transaction.atomic():
        _lock_user(user)
        if Memory.objects.filter(user=user, key=draft.key).exists():
            raise MemoryNotRestorable(
                f"You have a memory named '{draft.key}' again; edit that one instead of restoring this."
            )
        if MemoryEvent.objects.filter(user=user, key=draft.key, created_at__gt=event.created_at).exists():
            raise MemoryNotRestorable("This memory has changed since it was forgotten; it cannot be restored.")
        memory = Memory(user=user, key=draft.key, source=Source.MANUAL, created_at=now, version=0)
        _apply(memory, draft, embedding=embedding, now=now)
        memory.save()
        _record(
            memory,
            actor=Actor.USER,
            action=MemoryEvent.Action.RESTORED,
            reason="you restored it after it was forgotten",
            after=memory.snapshot(),
            now=now,
        )
        _apply_eviction_policy(user=user, now=now)
    return memory


def prospective_memory_raise(*, user: User, memory_id: int, reason: str, now: datetime | None = None) -> bool:
    """Mark an open intention `raised`: the coach asked about it (a check-in email), and
    the chat's context now says so. Returns False when it was not open any more.

    Its `updated_at` stays: what the person said did not change, so neither does its
    place in the eviction order. Its version moves on, so a suggestion made against the
    open memory (which would reopen it) no longer applies."""
    now = now or timezone.now()
    with transaction.atomic():
        _lock_user(user)
        memory = (
            Memory.objects.select_for_update()
            .filter(user=user, pk=memory_id, tier=Tier.PROSPECTIVE, status=ProspectiveStatus.OPEN)
            .first()
        )
        if memory is None:
            return False
        before = memory.snapshot()
        memory.status, memory.raised_at = ProspectiveStatus.RAISED, now
        memory.version += 1
        memory.save(update_fields=["status", "raised_at", "version"])
        _record(
            memory,
            actor=Actor.COACH,
            action=MemoryEvent.Action.RAISED,
            reason=reason,
            before=before,
            after=memory.snapshot(),
            now=now,
        )
    return True


def weekly_episode_save(*, user: User, key: str, text: str, now: datetime | None = None) -> Memory:
    """Keep the model's summary of a week as the person's weekly episode under `key`
    ("week-2026-48"). The eviction policy, applied in the same transaction, keeps the
    newest MEMORY_MAX_EPISODES of them."""
    content = text.strip()[: settings.MEMORY_CONTENT_MAX_CHARS]
    summary = _first_sentence(content, limit=SUMMARY_MAX_CHARS)
    draft = MemoryDraft(key=key, tier=Tier.EPISODIC, category=Category.EPISODE, summary=summary, content=content)
    outcome = memory_save(
        user=user, draft=draft, source=Source.COACH, actor=Actor.COACH, reason="the week, summarised", now=now
    )
    return outcome.memory


def memories_reembed(*, batch_size: int = 100) -> int:
    """Re-embed every memory whose embedding is missing or from another model, in batches.

    A row edited while its batch was being embedded keeps its newer embedding: each update
    is conditional on the version the text was read at.
    """
    model = settings.EMBEDDING_MODEL
    done, after_pk = 0, 0
    while True:
        batch = list(
            Memory.objects.filter(pk__gt=after_pk)
            .exclude(embedding_model=model, embedding__isnull=False)
            .order_by("pk")[:batch_size]
        )
        if not batch:
            return done
        vectors = llm.embed([memory_text(summary=m.summary, content=m.content) for m in batch])
        now = timezone.now()
        for memory, embedding in zip(batch, vectors, strict=True):
            updated = Memory.objects.filter(pk=memory.pk, version=memory.version).update(
                embedding=embedding.vector, embedding_model=embedding.model
            )
            if updated:
                _record(
                    memory, actor=Actor.SYSTEM, action=MemoryEvent.Action.REEMBEDDED, reason=embedding.model, now=now
                )
                done += 1
        after_pk = batch[-1].pk


def _lock_user(user: User) -> None:
    # Serialises every memory write of one user: the eviction plan reads the whole store,
    # so two concurrent saves must not both plan against the same 60 rows.
    User.objects.select_for_update().filter(pk=user.pk).values_list("pk", flat=True).get()


def _first_sentence(text: str, *, limit: int) -> str:
    # The index line of a longer note: its first sentence, cut at a word if need be.
    first = re.split(r"(?<=[.!?])\s", " ".join(text.split()), maxsplit=1)[0]
    if len(first) <= limit:
        return first
    return first[: limit - 1].rsplit(" ", 1)[0].rstrip(",;:") + "\u2026"


def _key_from(text: str) -> str:
    # A readable slug of the first words, cut at a hyphen so no word is halved.
    slug = re.sub(r"[-_]+", "-", slugify(text)).strip("-")
    if len(slug) > _ADDED_KEY_MAX_CHARS:
        slug = slug[:_ADDED_KEY_MAX_CHARS].rsplit("-", 1)[0]
    return slug or "note"


def _free_key(user: User, wanted: str) -> str:
    taken = set(Memory.objects.filter(user=user, key__startswith=wanted).values_list("key", flat=True))
    if wanted not in taken:
        return wanted
    return next(f"{wanted}-{n}" for n in range(2, len(taken) + 3) if f"{wanted}-{n}" not in taken)


def _apply(memory: Memory, draft: MemoryDraft, *, embedding: Embedding | None, now: datetime) -> None:
    memory.tier, memory.category = draft.tier, draft.category
    memory.summary, memory.content = draft.summary, draft.content
    memory.due_at, memory.status = draft.due_at, draft.status
    if embedding is not None:
        memory.embedding, memory.embedding_model = embedding.vector, embedding.model
    memory.version += 1
    memory.updated_at = now


def _erase_for_user(memory: Memory, *, action: str, now: datetime) -> None:
    # What the person asked to be forgotten is kept nowhere: not in the row, not in the
    # text of its history. The events stay, so the history still says what happened.
    MemoryEvent.objects.filter(user_id=memory.user_id, key=memory.key).update(before=None, after=None, reason="")
    _record(memory, actor=Actor.USER, action=action, now=now)
    memory.delete()


def _apply_eviction_policy(*, user: User, now: datetime) -> tuple[Eviction, ...]:
    plan = plan_eviction(
        memory_facts_for_user(user=user),
        max_stored=settings.MEMORY_MAX_STORED,
        max_episodes=settings.MEMORY_MAX_EPISODES,
    )
    if not plan:
        return ()
    reasons = {eviction.key: eviction.reason for eviction in plan}
    doomed = list(Memory.objects.filter(user=user, key__in=reasons))
    assert not any(m.is_protected for m in doomed), "the policy never evicts a protected memory"
    MemoryEvent.objects.bulk_create(
        MemoryEvent(
            user=user,
            memory=memory,
            key=memory.key,
            actor=Actor.SYSTEM,
            action=MemoryEvent.Action.EVICTED,
            reason=reasons[memory.key],
            before=memory.snapshot(),
            created_at=now,
        )
        for memory in doomed
    )
    Memory.objects.filter(pk__in=[m.pk for m in doomed]).delete()
    return tuple(plan)


def _record(
    memory: Memory,
    *,
    actor: str,
    action: str,
    reason: str = "",
    before: str | None = None,
    after: str | None = None,
    now: datetime | None = None,
) -> MemoryEvent:
    return MemoryEvent.objects.create(
        user_id=memory.user_id,
        memory=memory if memory.pk else None,
        key=memory.key,
        actor=actor,
        action=action,
        reason=reason,
        before=before,
        after=after,
        created_at=now or timezone.now(),
    )
