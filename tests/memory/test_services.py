"""Writing memories: upserts, the ceiling under load, user edits, deletion, proposals."""

from __future__ import annotations

import io
import threading
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone

from accounts.models import User
from infra.llm import Embedding
from memory.context import assemble_memory_context
from memory.drafts import (
    MemoryDraft,
    MemoryFull,
    MemoryInvalid,
    MemoryIsProtected,
    MemoryNotFound,
    ProposalDecided,
    ProposalOutdated,
)
from memory.models import Memory, MemoryEvent, MemoryProposal
from memory.proposals import proposal_confirm, proposal_make, proposal_reject
from memory.services import memory_delete, memory_edit_by_user, memory_save
from memory.store import lock_user
from offline_coach import ModelServer, bag_of_words_embedding
from tests.coach.races import race
from tests.conftest import make_user
from tests.memory.factories import make_memories, make_memory, memory_named

pytestmark = pytest.mark.django_db


def draft(key: str, *, summary: str | None = None, category: str = "habit", tier: str = "episodic") -> MemoryDraft:
    text = summary or f"Note about {key}"
    return MemoryDraft(key=key, tier=tier, category=category, summary=text, content=text)


def coach_saves(user: User, key: str, summary: str, *, category: str = "habit", tier: str = "episodic") -> None:
    memory_save(
        user=user,
        draft=draft(key, summary=summary, category=category, tier=tier),
        source="coach",
        actor="coach",
        embedding=Embedding(bag_of_words_embedding(summary), "bag-of-words"),
        # Only the weekly job files a memory as an episode.
        weekly_episode=category == "episode",
    )


def embedding_requests(server: ModelServer) -> int:
    return sum(1 for request in server.requests if request.path.endswith("/embeddings"))


def test_injury_typed_by_user_survives_200_coach_notes_about_oats(user: User) -> None:
    memory_save(
        user=user,
        draft=MemoryDraft(
            key="left-shoulder",
            tier="profile",
            category="injury",
            summary="Bad left shoulder, no overhead pressing",
            content="Bad left shoulder, no overhead pressing",
        ),
        source="user",
        actor="user",
    )
    for week in range(20):
        coach_saves(user, f"week-{week}", f"Week {week}: steady training", category="episode")

    for day in range(200):
        coach_saves(user, f"oats-{day}", f"Breakfast on day {day} was oats again")
        stored = Memory.objects.filter(user=user)
        assert stored.exclude(category="episode").count() <= 60
        assert stored.filter(category="episode").count() <= 14
        if day % 20 == 0:
            assert (
                "Bad left shoulder, no overhead pressing" in assemble_memory_context(user=user, now=timezone.now()).text
            )

    # What the person wrote is kept under a neutral key, never under the words it says.
    assert memory_named(user, "injury-1").summary == "Bad left shoulder, no overhead pressing"
    assert not Memory.objects.keyed(user.pk, "left-shoulder").exists()
    assert "Bad left shoulder, no overhead pressing" in assemble_memory_context(user=user, now=timezone.now()).text
    assert not Memory.objects.keyed(user.pk, "oats-0").exists()
    assert Memory.objects.keyed(user.pk, "oats-199").exists()


def test_saving_an_existing_key_updates_that_memory(user: User) -> None:
    coach_saves(user, "breakfast", "Oats")
    coach_saves(user, "breakfast", "Oats with berries")

    memory = memory_named(user, "breakfast")
    assert memory.summary == "Oats with berries"
    assert memory.version == 2
    assert Memory.objects.filter(user=user).count() == 1
    actions = list(MemoryEvent.objects.filter(user=user, memory_id=memory.pk).values_list("action", flat=True))
    assert actions == ["created", "updated"]


def test_each_eviction_is_an_event_with_its_reason_and_the_text_to_restore(user: User) -> None:
    oldest = make_memories(user, 60)[0]

    coach_saves(user, "one-more", "One more note")

    event = MemoryEvent.objects.get(user=user, action="evicted")
    assert (event.memory_id, event.key) == (oldest.pk, "note-0")
    assert event.reason == "the oldest of the coach's session notes, when more than 60 memories were kept"
    assert event.before_fields()["summary"] == "note number 0"
    assert event.actor == "system"


def test_a_coach_save_cannot_rewrite_a_protected_memory(user: User) -> None:
    make_memory(user, "allergy-nuts", category="allergy", summary="Nut allergy")

    with pytest.raises(MemoryIsProtected):
        coach_saves(user, "allergy-nuts", "No allergies after all", category="other")

    assert memory_named(user, "allergy-nuts").summary == "Nut allergy"


@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_saves_never_leave_the_user_above_the_ceiling(user: User) -> None:
    make_memories(user, 55)
    errors: list[BaseException] = []

    def save(number: int) -> None:
        try:
            coach_saves(user, f"concurrent-{number}", f"Concurrent note {number}")
        except BaseException as error:  # surfaced below: a thread's failure must fail the test
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=save, args=(n,)) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert Memory.objects.filter(user=user).count() == 60
    assert MemoryEvent.objects.filter(user=user, action="evicted").count() == 15


@pytest.mark.django_db(transaction=True)
def test_a_save_that_waited_for_another_writer_plans_its_evictions_with_what_that_one_wrote(user: User) -> None:
    make_memories(user, 59)
    holding, release = threading.Event(), threading.Event()

    def first() -> None:
        with transaction.atomic():
            lock_user(user, actor="coach")
            make_memory(user, "the-sixtieth", summary="Written while the person was locked")
            holding.set()
            release.wait(10)

    def second() -> None:
        coach_saves(user, "the-sixty-first", "Saved once the first was done")

    # race() fails unless PostgreSQL shows the second waiting on the first's lock.
    race(first, second, holding=holding, release=release)

    # Had the second read the store from before its wait, it would have seen room for one more.
    assert Memory.objects.filter(user=user).count() == 60
    assert MemoryEvent.objects.filter(user=user, action="evicted").count() == 1


def test_a_user_edit_re_embeds_exactly_once_and_protects_the_memory(user: User, model_server: ModelServer) -> None:
    original = make_memory(user, "breakfast", summary="Oats", content="Oats every day")
    before = embedding_requests(model_server)

    memory = memory_edit_by_user(
        user=user, memory_id=original.pk, draft=draft("breakfast", summary="Eggs now, not oats", category="habit")
    )

    assert embedding_requests(model_server) == before + 1
    assert memory.source == "manual" and memory.is_protected
    # Now the person's own: renamed by its category and a number.
    assert memory.pk == original.pk and memory.key == "habit-1"
    stored = Memory.objects.get(pk=memory.pk)
    assert stored.embedding == pytest.approx(bag_of_words_embedding("Eggs now, not oats"), abs=1e-6)
    event = MemoryEvent.objects.filter(user=user, memory_id=memory.pk).last()
    assert (event.actor, event.action, event.key) == ("user", "updated", "habit-1")
    assert event.before_fields()["summary"] == "Oats" and event.after_fields()["summary"] == "Eggs now, not oats"


def test_a_user_edit_that_keeps_the_text_makes_no_embedding_call(user: User, model_server: ModelServer) -> None:
    memory = make_memory(user, "breakfast", summary="Oats", content="Oats")
    before = embedding_requests(model_server)

    memory_edit_by_user(user=user, memory_id=memory.pk, draft=draft("breakfast", summary="Oats", category="preference"))

    assert embedding_requests(model_server) == before


def test_editing_a_memory_that_is_gone_says_so(user: User) -> None:
    memory = make_memory(user, "breakfast")
    memory.delete()

    with pytest.raises(MemoryNotFound, match="deleted or forgotten meanwhile"):
        memory_edit_by_user(user=user, memory_id=memory.pk, draft=draft("breakfast"))


def test_a_users_deletion_removes_the_embedding_and_blanks_the_history(user: User) -> None:
    coach_saves(user, "breakfast", "Oats every day")
    coach_saves(user, "breakfast", "Oats and eggs")
    memory = memory_named(user, "breakfast")

    memory_delete(user=user, memory_id=memory.pk, actor="user")

    assert not Memory.objects.filter(pk=memory.pk).exists()
    assert not Memory.objects.keyed(user.pk, "breakfast").exists()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM memory_memory WHERE embedding IS NOT NULL AND user_id = %s", [user.pk])
        assert cursor.fetchone()[0] == 0
    events = MemoryEvent.objects.filter(user=user, memory_id=memory.pk)
    assert [e.action for e in events] == ["created", "updated", "deleted"]
    assert all(e.key is None and e.before is None and e.after is None and e.reason == "" for e in events)


def test_the_coach_deleting_its_own_note_keeps_the_history(user: User) -> None:
    coach_saves(user, "breakfast", "Oats every day")
    memory = memory_named(user, "breakfast")

    memory_delete(user=user, memory_id=memory.pk, actor="coach", reason="no longer true")

    assert not Memory.objects.filter(pk=memory.pk).exists()
    event = MemoryEvent.objects.filter(user=user, memory_id=memory.pk).last()
    assert event.action == "deleted" and event.before_fields()["summary"] == "Oats every day"
    assert (event.key, event.reason) == ("breakfast", "no longer true")


def test_invalid_drafts_name_every_problem(user: User) -> None:
    bad = MemoryDraft(key="Bad Key", tier="someday", category="vibes", summary="x" * 151, content="y")

    with pytest.raises(MemoryInvalid) as caught:
        memory_save(user=user, draft=bad, source="coach", actor="coach")

    assert set(caught.value.errors) == {"key", "tier", "category", "summary"}


def test_a_prospective_memory_needs_a_future_date(user: User) -> None:
    past = MemoryDraft(
        key="talk",
        tier="prospective",
        category="project",
        summary="Talk",
        content="Talk",
        due_at=timezone.now() - timedelta(days=1),
    )

    with pytest.raises(MemoryInvalid) as caught:
        memory_save(user=user, draft=past, source="coach", actor="coach")

    assert "in the past" in caught.value.errors["due_at"]


def test_a_confirmed_proposal_applies_exactly_what_was_shown(user: User) -> None:
    memory = make_memory(user, "allergy-nuts", category="allergy", tier="profile", summary="Nut allergy")
    proposal = proposal_make(
        user=user,
        memory=memory,
        kind="update",
        draft=MemoryDraft("allergy-nuts", "profile", "allergy", "Peanut allergy only", "Peanuts, not tree nuts"),
        reason="they clarified",
    )

    updated = proposal_confirm(user=user, proposal_id=proposal.pk)

    assert (updated.summary, updated.content, updated.source) == (
        "Peanut allergy only",
        "Peanuts, not tree nuts",
        "manual",
    )
    assert MemoryProposal.objects.get(pk=proposal.pk).status == "confirmed"


def test_a_proposal_fails_when_the_memory_changed_since(user: User) -> None:
    memory = make_memory(user, "allergy-nuts", category="allergy", tier="profile", summary="Nut allergy")
    proposal = proposal_make(user=user, memory=memory, kind="delete", draft=None, reason="they said so")
    memory_edit_by_user(
        user=user,
        memory_id=memory.pk,
        draft=draft("allergy-nuts", summary="Severe nut allergy", category="allergy"),
    )

    with pytest.raises(ProposalOutdated):
        proposal_confirm(user=user, proposal_id=proposal.pk)

    assert Memory.objects.get(pk=memory.pk).summary == "Severe nut allergy"


def test_a_confirmed_delete_proposal_deletes_as_the_user_would(user: User) -> None:
    memory = make_memory(user, "allergy-nuts", category="allergy", summary="Nut allergy")
    proposal = proposal_make(user=user, memory=memory, kind="delete", draft=None, reason="outgrown it")

    assert proposal_confirm(user=user, proposal_id=proposal.pk) is None

    assert not Memory.objects.filter(pk=memory.pk).exists()
    events = MemoryEvent.objects.filter(user=user, memory_id=memory.pk)
    assert [e.action for e in events] == ["proposal_made", "proposal_confirmed"]
    assert all(e.before is None and e.after is None and e.key is None for e in events)


def test_a_rejected_proposal_changes_nothing(user: User) -> None:
    memory = make_memory(user, "allergy-nuts", category="allergy", summary="Nut allergy")
    proposal = proposal_make(user=user, memory=memory, kind="delete", draft=None, reason="outgrown it")

    proposal_reject(user=user, proposal_id=proposal.pk)

    assert Memory.objects.get(pk=memory.pk).version == memory.version
    assert MemoryProposal.objects.get(pk=proposal.pk).status == "rejected"


def test_another_users_proposal_cannot_be_confirmed(user: User) -> None:
    memory = make_memory(user, "allergy-nuts", category="allergy")
    proposal = proposal_make(user=user, memory=memory, kind="delete", draft=None, reason="outgrown it")
    stranger = make_user("stranger@example.com")

    with pytest.raises(ProposalDecided):
        proposal_confirm(user=stranger, proposal_id=proposal.pk)

    assert Memory.objects.filter(pk=memory.pk).exists()
    assert MemoryProposal.objects.get(pk=proposal.pk).status == "pending"


def test_reembed_renews_only_memories_of_another_model(user: User, model_server: ModelServer, settings) -> None:
    current = make_memory(user, "current", summary="Current model")
    old = make_memories(user, 3, prefix="old")
    Memory.objects.filter(pk__in=[m.pk for m in old]).update(embedding_model="ancient-model")

    call_command("reembed_memories", "--batch-size", "2", stdout=io.StringIO())

    assert set(Memory.objects.values_list("embedding_model", flat=True)) == {"bag-of-words"}
    assert Memory.objects.get(pk=current.pk).version == current.version
    assert MemoryEvent.objects.filter(action="reembedded").count() == 3


def test_moving_a_weekly_episode_out_past_what_one_person_keeps_is_refused_and_changes_nothing(
    user: User, settings
) -> None:
    settings.MEMORY_MAX_STORED, settings.MEMORY_MAX_PER_PERSON = 2, 3
    for n in range(3):
        make_memory(user, f"typed-{n}", source="user", category="habit", summary=f"Typed fact {n}")
    episode = make_memory(user, "week-2026-40", category="episode", summary="A week of easy runs")

    with pytest.raises(MemoryFull):
        memory_edit_by_user(
            user=user,
            memory_id=episode.pk,
            draft=MemoryDraft(key="", tier="episodic", category="goal", summary="Run easy all autumn", content=""),
        )

    episode.refresh_from_db()
    assert (episode.category, episode.summary) == ("episode", "A week of easy runs")
