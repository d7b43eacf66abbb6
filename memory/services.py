"""Writing memories: the coach's saves, the person's own additions and corrections,
deletions and their undo, restores and the marks a check-in leaves.

Every change runs in one transaction with the person's row locked, applies the ceiling
rule and the eviction policy in that same transaction, and appends a MemoryEvent
(memory.store); so the ceiling is an invariant, not an eventual state, even with
concurrent writers. Embeddings are computed before a transaction opens: no model call
ever holds a lock or a connection.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from infra.llm import Embedding
from memory.corrections import OldDetails, corrected_by_person
from memory.drafts import (
    MemoryChanged,
    MemoryDraft,
    MemoryIsProtected,
    MemoryNotFound,
    MemoryNotRestorable,
    ProposalOutdated,
    category_from_words,
    refuse_new_episode,
    validate_draft,
)
from memory.embeddings import embed_memory
from memory.keys import is_neutral, neutral_key
from memory.models import Memory, MemoryEvent, MemoryProposal, ProspectiveStatus, Source, Tier
from memory.policy import PROTECTED_CATEGORIES, Eviction, plan_eviction
from memory.store import (
    apply_draft,
    apply_eviction_policy,
    erase_for_user,
    give_neutral_key,
    lock_user,
    lock_user_for_key,
    memory_event,
    record_event,
    refuse_past_what_a_person_keeps,
    settle_store,
    store_facts,
    write_memory,
)
from memory.undo import DeletedMemory, UndoRefused, deleted_memory_from_token

if TYPE_CHECKING:
    from accounts.models import User

Actor = MemoryEvent.Actor
# Writers who may not change a protected memory themselves: they ask the person instead.
# Staff too: a staff edit that rewrote a protected memory (as its own source) would strip
# its protection; it becomes a suggestion the person confirms (DESIGN.md section 8).
MAY_ONLY_PROPOSE = frozenset({Actor.COACH, Actor.SYSTEM, Actor.ADMIN})
GONE = "This memory is gone: it was deleted or forgotten meanwhile."


@dataclass(frozen=True)
class WriteOutcome:
    memory: Memory
    created: bool
    evicted: tuple[Eviction, ...] = ()


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
    expected_version: int | None = None,
    weekly_episode: bool = False,
    now: datetime | None = None,
) -> WriteOutcome:
    """Create the memory named `draft.key`, or update it (an upsert by key).

    Only the person may rewrite a protected memory; anyone else's change must go through a
    proposal (MemoryIsProtected). `expected_version` makes an update conditional on the
    memory being as the writer read it (MemoryChanged otherwise). A write by anyone but
    the person that the ceiling has no room for is refused (MemoryNoRoom) and leaves
    nothing behind. What is protected is stored under a neutral key, which the outcome's
    memory carries. `merged` records an update that folds a near-duplicate in. The coach
    writes nothing while the person has memory off (MemoryOff).
    """
    now = now or timezone.now()
    draft = validate_draft(draft, now=now)
    if embedding is None:
        embedding = embed_memory(summary=draft.summary, content=draft.content)
    with transaction.atomic():
        before, memory = lock_user_for_key(user, draft.key, actor=actor)
        if not weekly_episode:
            refuse_new_episode(draft, was=memory.category if memory is not None else None)
        if memory is None:
            if expected_version is not None:
                raise MemoryNotFound(GONE)
            memory = Memory(user=user, key=draft.key, source=source, created_at=now, version=0)
            snapshot, action = None, MemoryEvent.Action.CREATED
        else:
            if actor in MAY_ONLY_PROPOSE and memory.is_protected:
                raise MemoryIsProtected(f"'{memory.key}' is protected: the coach may only propose a change")
            if actor in MAY_ONLY_PROPOSE and draft.category in PROTECTED_CATEGORIES:
                # Moving a note into a protected category in place is the person's call
                # (DESIGN.md section 3.1, rule 4): a model could lock the store with it.
                raise MemoryIsProtected(f"'{memory.key}' would become protected: only the person may move it there")
            if expected_version is not None and memory.version != expected_version:
                raise MemoryChanged(f"'{memory.key}' changed since it was read", memory=memory)
            snapshot = memory.snapshot()
            action = MemoryEvent.Action.MERGED if merged else MemoryEvent.Action.UPDATED
            if source != Source.COACH:
                memory.source = source
        apply_draft(memory, draft, embedding=embedding, now=now)
        if session_id is not None:
            memory.session_id, memory.message_id = session_id, message_id
        give_neutral_key(memory)
        event = memory_event(
            memory, actor=actor, action=action, reason=reason, before=snapshot, after=memory.snapshot(), now=now
        )
        write_memory(memory, event)
        evicted = settle_store(memory, actor=actor, before=before, now=now)
    return WriteOutcome(memory=memory, created=snapshot is None, evicted=evicted)


def memory_edit_by_user(
    *,
    user: User,
    memory_id: int,
    draft: MemoryDraft,
    expected_version: int | None = None,
    old_details: OldDetails = OldDetails.ASK,
    now: datetime | None = None,
) -> Memory:
    """A person's own correction: re-embeds once if the text changed, and makes the memory
    `manual`, hence protected (and neutrally named), whoever wrote it first. A new line over
    details that said something else raises DetailsMayBeStale unless `old_details` answers."""
    now = now or timezone.now()
    current = Memory.objects.filter(user=user, pk=memory_id).first()
    if current is None:
        raise MemoryNotFound(GONE)
    refuse_new_episode(draft, was=current.category)
    draft = corrected_by_person(MemoryDraft.of(current), draft, old_details=old_details)
    draft = validate_draft(replace(draft, key=current.key), now=now, due_may_be_past=True)
    text_changed = (draft.summary, draft.content) != (current.summary, current.content)
    stale = current.embedding is None or current.embedding_model != settings.EMBEDDING_MODEL
    embedding = embed_memory(summary=draft.summary, content=draft.content) if text_changed or stale else None
    with transaction.atomic():
        lock_user(user)
        before = store_facts(user)
        memory = Memory.objects.select_for_update().filter(user=user, pk=memory_id).first()
        if memory is None:
            raise MemoryNotFound(GONE)
        if expected_version is not None and memory.version != expected_version:
            raise ProposalOutdated("This memory changed while you were editing it; review it and try again.")
        snapshot = memory.snapshot()
        memory.source = Source.MANUAL
        apply_draft(memory, replace(draft, key=memory.key), embedding=embedding, now=now)
        give_neutral_key(memory)
        memory.save()
        record_event(
            memory,
            actor=Actor.USER,
            action=MemoryEvent.Action.UPDATED,
            before=snapshot,
            after=memory.snapshot(),
            now=now,
        )
        # A weekly episode moved to another category counts towards the ceiling from now on,
        # and towards what one person may keep.
        settle_store(memory, actor=Actor.USER, before=before, now=now)
    return memory


def memory_delete(
    *, user: User, memory_id: int, actor: str, reason: str = "", now: datetime | None = None
) -> DeletedMemory:
    """Delete a memory and its embedding. When the person deletes, the text and the key
    of its history are blanked too: what they asked to be forgotten is kept nowhere.

    Returns the memory as it was, for the person's undo (memory.undo seals it into a token
    the page holds); nothing of it stays on the server."""
    now = now or timezone.now()
    with transaction.atomic():
        lock_user(user, actor=actor)
        memory = Memory.objects.select_for_update().filter(user=user, pk=memory_id).first()
        if memory is None:
            raise MemoryNotFound(GONE)
        if actor in MAY_ONLY_PROPOSE and memory.is_protected:
            raise MemoryIsProtected(f"'{memory.key}' is protected: the coach may only propose deleting it")
        deleted = DeletedMemory.of(memory, deleted_at=now)
        if actor == Actor.USER:
            erase_for_user(memory, action=MemoryEvent.Action.DELETED, now=now)
        else:
            snapshot = memory.snapshot()
            record_event(
                memory, actor=actor, action=MemoryEvent.Action.DELETED, reason=reason, before=snapshot, now=now
            )
            memory.delete()
    return deleted


def memory_delete_all(*, user: User) -> int:
    """Forget everything about the person, history included. Returns how many went."""
    with transaction.atomic():
        lock_user(user)
        count = Memory.objects.filter(user=user).count()
        MemoryProposal.objects.filter(user=user).delete()
        MemoryEvent.objects.filter(user=user).delete()
        Memory.objects.filter(user=user).delete()
    return count


def memory_add_by_user(*, user: User, draft: MemoryDraft, now: datetime | None = None) -> Memory:
    """A memory the person typed ("always remember this"). It is theirs, hence protected,
    and named by its category and a number, never by what they wrote. Without a category,
    it is filed by its words (the import's rules: a safety topic first, `other` if none)."""
    now = now or timezone.now()
    if not draft.category:
        draft = replace(draft, category=category_from_words(f"{draft.summary} {draft.content}"))
    refuse_new_episode(draft, was=None)
    draft = validate_draft(replace(draft, key=f"{draft.category}-1"), now=now)
    embedding = embed_memory(summary=draft.summary, content=draft.content)
    with transaction.atomic():
        lock_user(user)
        taken = Memory.objects.filter(user=user).values_list("key", flat=True)
        draft = replace(draft, key=neutral_key(draft.category, taken))
        outcome = memory_save(
            user=user, draft=draft, source=Source.USER, actor=Actor.USER, embedding=embedding, now=now
        )
    return outcome.memory


def memory_keep(*, user: User, memory_id: int, now: datetime | None = None) -> Memory:
    """Protect a memory as it stands: it becomes `manual`, so the policy never evicts it.
    Its text is unchanged, so no embedding call is made."""
    now = now or timezone.now()
    with transaction.atomic():
        lock_user(user)
        memory = Memory.objects.select_for_update().filter(user=user, pk=memory_id).first()
        if memory is None:
            raise MemoryNotFound(GONE)
        if memory.source == Source.MANUAL:
            return memory
        snapshot = memory.snapshot()
        memory.source = Source.MANUAL
        memory.version += 1
        memory.updated_at = now
        give_neutral_key(memory)
        memory.save(update_fields=["key", "source", "version", "updated_at"])
        record_event(
            memory,
            actor=Actor.USER,
            action=MemoryEvent.Action.UPDATED,
            reason="you chose to keep it",
            before=snapshot,
            after=memory.snapshot(),
            now=now,
        )
        apply_eviction_policy(user_id=user.pk, now=now)
    return memory


def memory_restore(*, user: User, event_id: int, now: datetime | None = None) -> Memory:
    """Bring back a memory the eviction policy removed, from the snapshot in its `evicted`
    event, under its old id (so its history reads on). It returns as `manual`, so
    protected and neutrally named: the person chose to keep it this time.

    A prospective memory whose date has passed meanwhile is restored all the same (its
    status kept): refusing would lose it for good, and the person can then edit the date
    or mark it done. The policy runs after the insert like any save; the restored memory
    is protected, so it is never the one that goes.
    """
    now = now or timezone.now()
    event = MemoryEvent.objects.filter(user=user, pk=event_id, action=MemoryEvent.Action.EVICTED).first()
    if event is None or not event.before or event.memory_id is None:
        raise MemoryNotRestorable("There is no forgotten memory here to restore.")
    if event.created_at < now - timedelta(days=settings.MEMORY_FORGOTTEN_DAYS):
        raise MemoryNotRestorable(
            f"This memory was forgotten more than {settings.MEMORY_FORGOTTEN_DAYS} days ago; "
            "it can no longer be restored."
        )
    draft = validate_draft(MemoryDraft.from_fields(event.before_fields()), now=now, due_may_be_past=True)
    embedding = embed_memory(summary=draft.summary, content=draft.content)
    with transaction.atomic():
        lock_user(user)
        if MemoryEvent.objects.filter(user=user, memory_id=event.memory_id, created_at__gt=event.created_at).exists():
            raise MemoryNotRestorable("This memory has changed since it was forgotten; it cannot be restored.")
        if Memory.objects.keyed(user.pk, draft.key).exists():
            raise MemoryNotRestorable(
                f"You have a memory named '{draft.key}' again; edit that one instead of restoring this."
            )
        memory = Memory(pk=event.memory_id, user=user, key=draft.key, source=Source.MANUAL, created_at=now, version=0)
        apply_draft(memory, draft, embedding=embedding, now=now)
        before = store_facts(user)
        refuse_past_what_a_person_keeps(before, [*before, memory.facts])
        give_neutral_key(memory)
        memory.save(force_insert=True)
        record_event(
            memory,
            actor=Actor.USER,
            action=MemoryEvent.Action.RESTORED,
            reason="you restored it after it was forgotten",
            after=memory.snapshot(),
            now=now,
        )
        apply_eviction_policy(user_id=user.pk, now=now)
    return memory


def memory_undo_delete(*, user: User, token: str, now: datetime | None = None) -> Memory:
    """Bring back a memory the person deleted moments ago, exactly as it was (text,
    details, source, category, tier, date and status, created and changed dates, its id
    and its embedding), from the undo token its deletion handed the page (memory.undo).
    No model is called: the embedding comes back with it.

    Refused (UndoRefused, saying why) for another person's token, a damaged one, one
    older than MEMORY_UNDO_SECONDS, or when the coach has saved a memory of the same name
    meanwhile. Undoing twice (two tabs, a double click) gives the memory back all the same.
    The person may take the store past the ceiling, and the policy then forgets the
    coach's oldest notes as after any write; should the memory itself be the one to go,
    it comes back as the person's own (kept) rather than straight into "recently forgotten".
    """
    now = now or timezone.now()
    deleted = deleted_memory_from_token(token, user_id=user.pk, now=now)
    cleared = getattr(user, "memories_deleted_all_at", None)
    if cleared is not None and deleted.deleted_on <= cleared:
        raise UndoRefused("You deleted all your memories since, so this one was not brought back.")
    memory = deleted.row()
    with transaction.atomic():
        lock_user(user)
        back = Memory.objects.filter(user=user, pk=deleted.memory_id).first()
        if back is not None:
            return back
        if MemoryEvent.objects.filter(
            user=user, memory_id=deleted.memory_id, created_at__gt=deleted.deleted_on
        ).exists():
            raise UndoRefused("This memory was brought back and deleted again since; use its latest Undo.")
        if Memory.objects.keyed(user.pk, memory.key).exists():
            if not is_neutral(memory.key):
                raise UndoRefused(
                    "Your coach has noted something under the same name since you deleted this, "
                    "so it was not brought back: edit that memory instead."
                )
            # A neutral key says nothing but its category: the next free one serves as well.
            taken = Memory.objects.filter(user=user).values_list("key", flat=True)
            memory.key = neutral_key(memory.category, taken)
        reason = "you undid deleting it"
        before = store_facts(user)
        refuse_past_what_a_person_keeps(before, [*before, memory.facts])
        plan = plan_eviction(
            [*before, memory.facts],
            max_stored=settings.MEMORY_MAX_STORED,
            max_episodes=settings.MEMORY_MAX_EPISODES,
        )
        if any(eviction.ref == memory.pk for eviction in plan):
            memory.source = Source.MANUAL
            reason = "you undid deleting it; it is kept for good, as your coach's memory was full"
        give_neutral_key(memory)
        memory.save(force_insert=True)
        record_event(
            memory,
            actor=Actor.USER,
            action=MemoryEvent.Action.RESTORED,
            reason=reason,
            after=memory.snapshot(),
            now=now,
        )
        apply_eviction_policy(user_id=user.pk, now=now)
    return memory


def prospective_memory_raise(*, user: User, memory_id: int, reason: str, now: datetime | None = None) -> bool:
    """Mark an open intention `raised`: the coach asked about it (a check-in email), and
    the chat's context now says so. Returns False when it was not open any more.

    Its `updated_at` stays: what the person said did not change, so neither does its
    place in the eviction order. Its version moves on, so a suggestion made against the
    open memory (which would reopen it) no longer applies."""
    now = now or timezone.now()
    with transaction.atomic():
        lock_user(user)
        memory = (
            Memory.objects.select_for_update()
            .filter(user=user, pk=memory_id, tier=Tier.PROSPECTIVE, status=ProspectiveStatus.OPEN)
            .first()
        )
        if memory is None:
            return False
        snapshot = memory.snapshot()
        memory.status, memory.raised_at = ProspectiveStatus.RAISED, now
        memory.version += 1
        memory.save(update_fields=["status", "raised_at", "version"])
        record_event(
            memory,
            actor=Actor.COACH,
            action=MemoryEvent.Action.RAISED,
            reason=reason,
            before=snapshot,
            after=memory.snapshot(),
            now=now,
        )
    return True
