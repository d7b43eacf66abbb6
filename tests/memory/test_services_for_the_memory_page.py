"""The writes the memory page adds: "always remember this", keeping, restoring what was forgotten."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import User
from infra.llm import Embedding
from memory.context import assemble_memory_context
from memory.drafts import MemoryDraft, MemoryInvalid, MemoryNotFound, MemoryNotRestorable
from memory.models import Memory, MemoryEvent
from memory.services import memory_add_by_user, memory_delete, memory_keep, memory_restore, memory_save
from offline_coach import ModelServer, offline_embedding
from tests.memory.factories import make_memories, make_memory

pytestmark = pytest.mark.django_db


def embedding_requests(server: ModelServer) -> int:
    return sum(1 for request in server.requests if request.path.endswith("/embeddings"))


def typed(summary: str, *, key: str = "", tier: str = "profile", category: str = "other") -> MemoryDraft:
    return MemoryDraft(key=key, tier=tier, category=category, summary=summary, content="")


def coach_saves(user: User, key: str, summary: str) -> None:
    memory_save(
        user=user,
        draft=MemoryDraft(key=key, tier="episodic", category="habit", summary=summary, content=summary),
        source="coach",
        actor="coach",
        embedding=Embedding(offline_embedding(summary), "offline-embedding"),
    )


def evict_oldest(user: User, settings, *, keep: int = 2) -> MemoryEvent:
    """Fill the store past a small ceiling so the policy evicts the oldest note."""
    settings.MEMORY_MAX_STORED = keep
    make_memories(user, keep)
    coach_saves(user, "newest", "The newest note")
    return MemoryEvent.objects.get(user=user, action="evicted")


# Always remember this ---------------------------------------------------------------


def test_a_typed_memory_is_the_users_own_and_protected(user: User, model_server: ModelServer) -> None:
    before = embedding_requests(model_server)

    memory = memory_add_by_user(user=user, draft=typed("Vegetarian since 2019", category="preference"))

    assert memory.source == "user" and memory.is_protected
    assert memory.key == "vegetarian-since-2019"
    assert memory.content == "Vegetarian since 2019"
    assert embedding_requests(model_server) == before + 1
    event = MemoryEvent.objects.get(user=user, key=memory.key)
    assert (event.actor, event.action) == ("user", "created")


def test_adding_the_same_words_twice_never_overwrites_the_first(user: User) -> None:
    first = memory_add_by_user(user=user, draft=typed("Runs on Sundays"))
    second = memory_add_by_user(user=user, draft=typed("Runs on Sundays", category="habit"))

    assert (first.key, second.key) == ("runs-on-sundays", "runs-on-sundays-2")
    assert Memory.objects.filter(user=user).count() == 2


def test_a_key_is_made_even_from_words_that_have_no_ascii(user: User) -> None:
    memory = memory_add_by_user(user=user, draft=typed("寿司が好き"))

    assert memory.key == "note"


def test_a_long_summary_makes_a_key_cut_at_a_word(user: User) -> None:
    memory = memory_add_by_user(user=user, draft=typed("Training for the Helsinki marathon in the autumn of next year"))

    assert memory.key == "training-for-the-helsinki-marathon-in"


def test_an_invalid_typed_memory_is_refused_before_any_embedding_call(user: User, model_server: ModelServer) -> None:
    before = embedding_requests(model_server)

    with pytest.raises(MemoryInvalid) as refused:
        memory_add_by_user(user=user, draft=typed("x" * 151, category="cooking"))

    assert set(refused.value.errors) == {"summary", "category"}
    assert embedding_requests(model_server) == before


# Keep ---------------------------------------------------------------------------------


def test_keeping_protects_a_coach_note_without_an_embedding_call(user: User, model_server: ModelServer) -> None:
    make_memory(user, "breakfast", summary="Oats every morning")
    before = embedding_requests(model_server)

    memory = memory_keep(user=user, key="breakfast")

    assert memory.source == "manual" and memory.is_protected
    assert memory.summary == "Oats every morning"
    assert embedding_requests(model_server) == before
    event = MemoryEvent.objects.get(user=user, key="breakfast")
    assert (event.action, event.reason) == ("updated", "you chose to keep it")


def test_keeping_a_memory_that_is_gone_says_so(user: User) -> None:
    with pytest.raises(MemoryNotFound, match="deleted or forgotten meanwhile"):
        memory_keep(user=user, key="breakfast")


# Restore ------------------------------------------------------------------------------


def test_a_restored_memory_is_protected_and_back_in_the_context(user: User, settings) -> None:
    event = evict_oldest(user, settings)
    assert "note number 0" not in assemble_memory_context(user=user, now=timezone.now()).text

    memory = memory_restore(user=user, event_id=event.pk)

    assert memory.key == "note-0" and memory.source == "manual" and memory.is_protected
    assert memory.summary == "note number 0" and memory.embedding_model == "offline-embedding"
    text = assemble_memory_context(user=user, now=timezone.now()).text
    kept_block = text.split("# kept for good", 1)[1].split("\n#", 1)[0]
    assert "note number 0" in kept_block
    restored = MemoryEvent.objects.filter(user=user, key="note-0").last()
    assert (restored.actor, restored.action) == ("user", "restored")


def test_restoring_applies_the_ceiling_and_never_evicts_what_it_restored(user: User, settings) -> None:
    event = evict_oldest(user, settings)

    memory_restore(user=user, event_id=event.pk)

    assert Memory.objects.filter(user=user).count() == 2
    assert Memory.objects.filter(user=user, key="note-0").exists()
    assert MemoryEvent.objects.filter(user=user, action="evicted", key="note-1").exists()


def test_a_memory_can_be_restored_only_once(user: User, settings) -> None:
    event = evict_oldest(user, settings, keep=3)
    memory_restore(user=user, event_id=event.pk)

    with pytest.raises(MemoryNotRestorable, match="again"):
        memory_restore(user=user, event_id=event.pk)


def test_a_memory_deleted_after_its_restore_cannot_be_restored_again(user: User, settings) -> None:
    event = evict_oldest(user, settings, keep=3)
    memory_restore(user=user, event_id=event.pk)
    memory_delete(user=user, key="note-0", actor="user")

    with pytest.raises(MemoryNotRestorable):
        memory_restore(user=user, event_id=event.pk)


def test_an_eviction_older_than_the_window_cannot_be_restored(user: User, settings) -> None:
    event = evict_oldest(user, settings)

    with pytest.raises(MemoryNotRestorable, match="more than 30 days ago"):
        memory_restore(user=user, event_id=event.pk, now=timezone.now() + timedelta(days=31))


def test_another_users_eviction_cannot_be_restored(user: User, other_user: User, settings) -> None:
    event = evict_oldest(other_user, settings)

    with pytest.raises(MemoryNotRestorable):
        memory_restore(user=user, event_id=event.pk)
    assert not Memory.objects.filter(user=user).exists()


def test_an_event_that_is_not_an_eviction_cannot_be_restored(user: User) -> None:
    coach_saves(user, "breakfast", "Oats")
    created = MemoryEvent.objects.get(user=user, key="breakfast")

    with pytest.raises(MemoryNotRestorable):
        memory_restore(user=user, event_id=created.pk)


def test_a_prospective_memory_whose_date_passed_comes_back_all_the_same(user: User) -> None:
    talk = make_memory(user, "talk", tier="prospective", category="project", due_at=timezone.now() + timedelta(days=2))
    event = MemoryEvent.objects.create(
        user=user, key="talk", actor="system", action="evicted", reason="room", before=talk.snapshot()
    )
    talk.delete()

    memory = memory_restore(user=user, event_id=event.pk, now=timezone.now() + timedelta(days=5))

    assert memory.tier == "prospective" and memory.status == "open"
    assert memory.due_at == talk.due_at
