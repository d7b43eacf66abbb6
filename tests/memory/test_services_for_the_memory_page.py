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
from offline_coach import ModelServer, bag_of_words_embedding
from tests.memory.factories import make_memories, make_memory, memory_named

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
        embedding=Embedding(bag_of_words_embedding(summary), "bag-of-words"),
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
    # Named by its category and a number, never by the words the person typed.
    assert memory.key == "preference-1"
    assert memory.content == "Vegetarian since 2019"
    assert embedding_requests(model_server) == before + 1
    event = MemoryEvent.objects.get(user=user, memory_id=memory.pk)
    assert (event.actor, event.action, event.key) == ("user", "created", "preference-1")


def test_adding_the_same_words_twice_never_overwrites_the_first(user: User) -> None:
    first = memory_add_by_user(user=user, draft=typed("Runs on Sundays"))
    second = memory_add_by_user(user=user, draft=typed("Runs on Sundays", category="habit"))
    third = memory_add_by_user(user=user, draft=typed("Runs on Sundays"))

    assert (first.key, second.key, third.key) == ("other-1", "habit-1", "other-2")
    assert Memory.objects.filter(user=user).count() == 3
    assert Memory.objects.get(pk=first.pk).version == 1


def test_a_key_is_made_even_from_words_that_have_no_ascii(user: User) -> None:
    memory = memory_add_by_user(user=user, draft=typed("寿司が好き"))

    assert memory.key == "other-1" and memory.summary == "寿司が好き"


def test_a_long_summary_makes_a_key_cut_at_a_word(user: User) -> None:
    memory = memory_add_by_user(
        user=user, draft=typed("Training for the Helsinki marathon in the autumn of next year", category="goal")
    )

    # However long the summary, the key is its category and a number: none of its words.
    assert memory.key == "goal-1"
    assert memory.summary == "Training for the Helsinki marathon in the autumn of next year"


def test_an_invalid_typed_memory_is_refused_before_any_embedding_call(user: User, model_server: ModelServer) -> None:
    before = embedding_requests(model_server)

    with pytest.raises(MemoryInvalid) as refused:
        memory_add_by_user(user=user, draft=typed("x" * 151, category="cooking"))

    assert set(refused.value.errors) == {"summary", "category"}
    assert embedding_requests(model_server) == before


# Keep ---------------------------------------------------------------------------------


def test_keeping_protects_a_coach_note_without_an_embedding_call(user: User, model_server: ModelServer) -> None:
    note = make_memory(user, "breakfast", summary="Oats every morning")
    before = embedding_requests(model_server)

    memory = memory_keep(user=user, memory_id=note.pk)

    assert memory.source == "manual" and memory.is_protected
    assert memory.summary == "Oats every morning"
    # The person's own now: renamed by its category and a number.
    assert memory.key == "habit-1" and memory_named(user, "habit-1").pk == note.pk
    assert embedding_requests(model_server) == before
    event = MemoryEvent.objects.get(user=user, memory_id=note.pk)
    assert (event.action, event.reason, event.key) == ("updated", "you chose to keep it", "habit-1")


def test_keeping_a_memory_that_is_gone_says_so(user: User) -> None:
    memory = make_memory(user, "breakfast")
    memory.delete()

    with pytest.raises(MemoryNotFound, match="deleted or forgotten meanwhile"):
        memory_keep(user=user, memory_id=memory.pk)


# Restore ------------------------------------------------------------------------------


def test_a_restored_memory_is_protected_and_back_in_the_context(user: User, settings) -> None:
    event = evict_oldest(user, settings)
    assert "note number 0" not in assemble_memory_context(user=user, now=timezone.now()).text

    memory = memory_restore(user=user, event_id=event.pk)

    # Back under its old id, as the person's own: named by its category and a number.
    assert memory.pk == event.memory_id and memory.key == "habit-1"
    assert memory.source == "manual" and memory.is_protected
    assert memory.summary == "note number 0" and memory.embedding_model == "bag-of-words"
    text = assemble_memory_context(user=user, now=timezone.now()).text
    habit_block = text.split("## habit\n", 1)[1].split("\n##", 1)[0]
    [line] = [line for line in habit_block.splitlines() if "note number 0" in line]
    # The person's own now: "by them", and a neutral key.
    assert line.startswith("- habit-1 (by them, ") and line.endswith("): note number 0")
    restored = MemoryEvent.objects.filter(user=user, memory_id=memory.pk).last()
    assert (restored.actor, restored.action, restored.key) == ("user", "restored", "habit-1")


def test_restoring_applies_the_ceiling_and_never_evicts_what_it_restored(user: User, settings) -> None:
    event = evict_oldest(user, settings)

    memory_restore(user=user, event_id=event.pk)

    assert Memory.objects.filter(user=user).count() == 2
    assert Memory.objects.filter(user=user, pk=event.memory_id).exists()
    evicted = MemoryEvent.objects.filter(user=user, action="evicted")
    # The restored memory is renamed in its history too; the one evicted to make room is not.
    assert [e.key for e in evicted] == ["habit-1", "note-1"]


def test_a_memory_can_be_restored_only_once(user: User, settings) -> None:
    event = evict_oldest(user, settings, keep=3)
    memory_restore(user=user, event_id=event.pk)

    # Its restore is the later event: the forgotten version no longer applies.
    with pytest.raises(MemoryNotRestorable, match="has changed since it was forgotten"):
        memory_restore(user=user, event_id=event.pk)
    assert Memory.objects.filter(user=user, pk=event.memory_id).count() == 1


def test_a_memory_deleted_after_its_restore_cannot_be_restored_again(user: User, settings) -> None:
    event = evict_oldest(user, settings, keep=3)
    memory_restore(user=user, event_id=event.pk)
    memory_delete(user=user, memory_id=event.memory_id, actor="user")

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
    created = MemoryEvent.objects.get(user=user, memory_id=memory_named(user, "breakfast").pk)

    with pytest.raises(MemoryNotRestorable):
        memory_restore(user=user, event_id=created.pk)


def test_a_prospective_memory_whose_date_passed_comes_back_all_the_same(user: User) -> None:
    talk = make_memory(user, "talk", tier="prospective", category="project", due_at=timezone.now() + timedelta(days=2))
    event = MemoryEvent.objects.create(
        user=user,
        memory_id=talk.pk,
        key="talk",
        actor="system",
        action="evicted",
        reason="room",
        before=talk.snapshot(),
    )
    talk.delete()

    memory = memory_restore(user=user, event_id=event.pk, now=timezone.now() + timedelta(days=5))

    assert memory.tier == "prospective" and memory.status == "open"
    assert memory.due_at == talk.due_at
