"""The memory reads written as SQL return what the ORM's queries returned: the same rows,
in the same order, scoped to one person, and nothing while that person has memory off."""

from __future__ import annotations

import threading

import pytest
from django.db import transaction
from pgvector.django import CosineDistance

from accounts.models import User
from memory.drafts import MemoryOff
from memory.models import Memory
from memory.selectors import memories_by_similarity, memory_by_key, memory_by_key_and_similar, memory_facts_for_user
from memory.store import lock_user
from offline_coach import bag_of_words_embedding
from tests.coach.races import race
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db


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


def test_a_coach_write_is_refused_while_memory_is_off_and_the_persons_own_is_not(user: User) -> None:
    User.objects.filter(pk=user.pk).update(memory_enabled=False)

    with pytest.raises(MemoryOff), transaction.atomic():
        lock_user(user, actor="coach")
    with transaction.atomic():
        lock_user(user, actor="user")


@pytest.mark.django_db(transaction=True)
def test_a_second_memory_write_of_the_same_person_waits_for_the_first(user: User) -> None:
    holding, release = threading.Event(), threading.Event()

    def first() -> None:
        with transaction.atomic():
            lock_user(user, actor="coach")
            holding.set()
            release.wait(10)

    def second() -> None:
        with transaction.atomic():
            lock_user(user, actor="coach")

    # race() fails unless PostgreSQL shows the second waiting on the first's lock.
    race(first, second, holding=holding, release=release)
