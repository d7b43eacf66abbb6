"""Reading memories: by key, by meaning (nearest first by the database's own cosine
distance), as the policy sees them, what was forgotten and what happened to a memory; the
person's rows alone, and nothing while they have memory off where only memory in use is
asked for."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from pgvector.django import CosineDistance

from accounts.models import User
from memory.models import Memory, MemoryEvent
from memory.selectors import (
    memories_by_similarity,
    memories_for_prompt,
    memory_by_key,
    memory_by_key_and_similar,
    memory_facts_for_user,
    memory_history_for_user,
    memory_list_for_user,
    recently_forgotten_for_user,
)
from memory.services import memory_restore
from offline_coach import bag_of_words_embedding
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db


def forget(user: User, key: str, *, days_ago: float = 0) -> MemoryEvent:
    memory = make_memory(user, key, summary=f"About {key}")
    event = MemoryEvent.objects.create(
        user=user,
        memory_id=memory.pk,
        key=key,
        actor="system",
        action="evicted",
        reason="room",
        before=memory.snapshot(),
        created_at=timezone.now() - timedelta(days=days_ago),
    )
    memory.delete()
    return event


def forgotten_keys(user: User) -> list[str]:
    return [e.key for e in recently_forgotten_for_user(user=user, now=timezone.now(), days=30)]


def test_recently_forgotten_lists_evictions_newest_first(user: User) -> None:
    forget(user, "older", days_ago=2)
    forget(user, "newer", days_ago=1)

    assert forgotten_keys(user) == ["newer", "older"]


def test_an_eviction_older_than_the_window_is_not_listed(user: User) -> None:
    forget(user, "ancient", days_ago=31)

    assert forgotten_keys(user) == []


def test_a_restored_memory_is_no_longer_listed(user: User) -> None:
    event = forget(user, "rain")

    memory_restore(user=user, event_id=event.pk)

    assert forgotten_keys(user) == []


def test_a_memory_stored_again_is_not_listed(user: User) -> None:
    event = forget(user, "rain")
    # Another memory under the same key is another memory: the forgotten one stays listed.
    again = make_memory(user, "rain")
    assert forgotten_keys(user) == ["rain"]

    # The forgotten memory itself stored again, under its id: no longer listed.
    Memory.objects.filter(pk=again.pk).update(id=event.memory_id)

    assert forgotten_keys(user) == []


def test_a_memory_evicted_twice_is_listed_once(user: User) -> None:
    first = forget(user, "rain", days_ago=3)
    MemoryEvent.objects.create(
        user=user,
        memory_id=first.memory_id,
        key="rain",
        actor="user",
        action="restored",
        after=first.before,
        created_at=timezone.now() - timedelta(days=2),
    )
    again = MemoryEvent.objects.create(
        user=user,
        memory_id=first.memory_id,
        key="rain",
        actor="system",
        action="evicted",
        reason="room",
        before=first.before,
        created_at=timezone.now(),
    )

    assert [e.pk for e in recently_forgotten_for_user(user=user, now=timezone.now(), days=30)] == [again.pk]


def test_an_eviction_whose_text_the_user_erased_is_not_listed(user: User) -> None:
    event = forget(user, "rain")
    MemoryEvent.objects.filter(user=user, memory_id=event.memory_id).update(before=None)

    assert forgotten_keys(user) == []


def test_only_the_users_own_evictions_are_listed(user: User, other_user: User) -> None:
    forget(other_user, "rain")

    assert forgotten_keys(user) == []


def test_recently_forgotten_is_one_query_however_many(user: User, django_assert_num_queries) -> None:
    for number in range(12):
        forget(user, f"note-{number}")

    with django_assert_num_queries(1):
        assert len(list(recently_forgotten_for_user(user=user, now=timezone.now(), days=30))) == 12


def test_the_history_of_a_memory_is_only_the_users_own(user: User, other_user: User) -> None:
    mine = forget(user, "rain")
    theirs = forget(other_user, "rain")

    assert [e.user_id for e in memory_history_for_user(user=user, memory_id=mine.memory_id)] == [user.pk]
    assert not memory_history_for_user(user=user, memory_id=theirs.memory_id).exists()


def test_the_memories_a_prompt_is_made_from_are_every_memory_newest_change_first_without_embeddings(
    user: User, other_user: User
) -> None:
    same_moment = timezone.now()
    for number in range(3):
        make_memory(user, f"note-{number}", summary=f"Note {number}: ça va 🏃", updated_at=same_moment)
    make_memory(user, "older", updated_at=same_moment - timedelta(days=2))
    make_memory(user, "newest", tier="prospective", due_at=same_moment + timedelta(days=3))
    make_memory(other_user, "theirs", summary="Not theirs")

    memories = memories_for_prompt(user=user)

    by_orm = sorted(memory_list_for_user(user=user), key=lambda m: (m.updated_at, m.pk), reverse=True)
    assert [m.pk for m in memories] == [m.pk for m in by_orm]
    for read, expected in zip(memories, by_orm, strict=True):
        for field in Memory._meta.concrete_fields:
            if field.name != "embedding":
                assert getattr(read, field.attname) == getattr(expected, field.attname)
        assert read.get_deferred_fields() == {"embedding"}


def _nearest_by_orm(user: User, vector: list[float], **exclude: object) -> list[tuple[int, float]]:
    memories = (
        Memory.objects.filter(user=user, embedding_model="bag-of-words", embedding__isnull=False)
        .annotate(distance=CosineDistance("embedding", vector))
        .order_by("distance", "pk")
    )
    for field, value in exclude.items():
        memories = memories.exclude(**{field: value})
    return [(m.pk, round(1.0 - float(m.distance), 4)) for m in memories[:5]]


def test_a_similarity_search_finds_what_the_orm_found_in_the_same_order(user: User, other_user: User) -> None:
    texts = ["Runs on Sundays", "Runs on Sundays in the park", "Swims on Tuesdays", "Knee hurts on runs", "Reads"]
    stored = [make_memory(user, f"note-{n}", summary=text) for n, text in enumerate(texts)]
    make_memory(user, "episode", category="episode", summary="Runs on Sundays, this week too")
    make_memory(other_user, "theirs", summary="Runs on Sundays")
    vector = bag_of_words_embedding("Runs on Sundays")

    found = memories_by_similarity(user=user, vector=vector, model="bag-of-words", limit=5)
    # As a save compares itself: the memory under its own key left out, and the episodes.
    keyed, narrowed = memory_by_key_and_similar(
        user=user, key="note-0", vector=vector, model="bag-of-words", limit=5, exclude_category="episode"
    )

    assert [(s.memory.pk, s.similarity) for s in found] == _nearest_by_orm(user, vector)
    assert keyed == stored[0]
    assert [(s.memory.pk, s.similarity) for s in narrowed] == _nearest_by_orm(
        user, vector, pk=stored[0].pk, category="episode"
    )
    match = found[0].memory
    assert (match.key, match.summary, match.tier, match.category) == ("note-0", "Runs on Sundays", "episodic", "habit")
    assert match.get_deferred_fields() >= {"content", "embedding", "source"}


def test_memory_off_reads_nothing_where_only_memory_in_use_is_asked_for(user: User) -> None:
    make_memory(user, "note", summary="Runs on Sundays")
    User.objects.filter(pk=user.pk).update(memory_enabled=False)
    vector = bag_of_words_embedding("Runs on Sundays")

    assert memory_by_key(user=user, key="note") is not None
    assert memory_by_key(user=user, key="note", in_use_only=True) is None
    assert memories_by_similarity(user=user, vector=vector, model="bag-of-words", limit=5)
    assert memories_by_similarity(user=user, vector=vector, model="bag-of-words", limit=5, in_use_only=True) == []


def test_a_memory_found_by_key_is_the_orms_without_its_embedding(user: User, other_user: User) -> None:
    mine = make_memory(user, "knee", category="injury", summary="Left knee: no jumps")
    make_memory(other_user, "knee", summary="Not theirs")

    found = memory_by_key(user=user, key="knee")

    expected = Memory.objects.defer("embedding").get(pk=mine.pk)
    for field in Memory._meta.concrete_fields:
        if field.name != "embedding":
            assert getattr(found, field.attname) == getattr(expected, field.attname)
    assert found.get_deferred_fields() == {"embedding"}
    assert memory_by_key(user=user, key="elbow") is None


def test_the_policys_facts_are_every_memory_of_the_person(user: User, other_user: User) -> None:
    mine = [make_memory(user, f"note-{n}") for n in range(3)]
    make_memory(other_user, "theirs")

    facts = memory_facts_for_user(user=user)

    assert sorted(facts, key=lambda f: f.ref) == [m.facts for m in mine]
