"""The memory tools as the model meets them: strict schemas, results it can read, its own user only."""

from __future__ import annotations

import json
import math
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.models import User
from infra.llm import Embedding
from memory.drafts import MemoryDraft
from memory.models import Memory, MemoryEvent, MemoryProposal
from memory.services import memory_save
from memory.tool_schemas import tool_definitions
from memory.tools import ToolContext, run_tool
from offline_coach import ModelServer
from tests.memory.factories import make_memory, memory_named

pytestmark = pytest.mark.django_db


def call(user: User, name: str, context: ToolContext | None = None, **arguments) -> dict:
    return json.loads(run_tool(context or ToolContext(user=user), name, json.dumps(arguments)))


def save(user: User, key: str, summary: str, *, context: ToolContext | None = None, **fields) -> dict:
    arguments = {
        "key": key,
        "tier": "episodic",
        "category": "project",
        "summary": summary,
        "content": summary,
        "due_at": None,
        "keep_separate": None,
    } | fields
    return call(user, "save_memory", context, **arguments)


def unit(*components: float) -> list[float]:
    vector = list(components) + [0.0] * (384 - len(components))
    norm = math.sqrt(sum(c * c for c in vector))
    return [c / norm for c in vector]


def test_every_tool_schema_is_strict() -> None:
    for tool in tool_definitions():
        parameters = tool["function"]["parameters"]
        assert tool["function"]["strict"] is True
        assert parameters["additionalProperties"] is False
        assert sorted(parameters["required"]) == sorted(parameters["properties"])
        assert not {"source", "user", "user_id", "id"} & set(parameters["properties"])


def test_three_sticky_notes_about_one_reading_leave_one_memory(user: User, model_server: ModelServer) -> None:
    # A semantic model puts these three close together; the scripted server stands in for one.
    notes = ["The reading went well", "User felt confident at the reading", "The Rönnells reading was a success"]
    for number, note in enumerate(notes):
        model_server.set_embedding(note, unit(1.0, 0.1 * number, 0.05))
    context = ToolContext(user=user)

    results = [save(user, f"reading-{n}", note, context=context) for n, note in enumerate(notes)]

    assert results[0]["status"] == "saved"
    assert [r["status"] for r in results[1:]] == ["not_saved", "not_saved"]
    assert all(r["duplicates"][0]["key"] == "reading-0" for r in results[1:])
    assert all(r["duplicates"][0]["similarity"] >= 0.8 for r in results[1:])
    assert Memory.objects.filter(user=user).count() == 1


def test_a_note_that_reads_like_a_weekly_episode_is_saved_not_refused_as_a_copy_of_it(
    user: User, model_server: ModelServer
) -> None:
    week = "A good week: writing in the mornings, a long run, and evening pages once school started"
    episode = MemoryDraft(key="week-2026-06", tier="episodic", category="episode", summary=week, content=week)
    vector = Embedding(unit(1.0, 0.1), settings.EMBEDDING_MODEL)
    memory_save(user=user, draft=episode, source="coach", actor="system", embedding=vector, weekly_episode=True)
    note = "Writes in the evenings once the kids are in bed"
    model_server.set_embedding(note, unit(1.0, 0.12))

    result = save(user, "schedule", note, tier="profile", category="schedule")

    assert result["status"] == "saved"
    assert memory_named(user, "week-2026-06").summary == week


def test_merging_after_a_refused_save_is_recorded_as_a_merge(user: User, model_server: ModelServer) -> None:
    model_server.set_embedding("The reading went well", unit(1.0))
    model_server.set_embedding("Felt confident at the reading", unit(1.0, 0.1))
    context = ToolContext(user=user)
    save(user, "reading", "The reading went well", context=context)
    save(user, "reading-confidence", "Felt confident at the reading", context=context)

    result = call(
        user,
        "update_memory",
        context,
        key="reading",
        summary="The reading went well; felt confident",
        content=None,
        tier=None,
        category=None,
        due_at=None,
        status=None,
        clear=None,
        reason="merge",
    )

    assert result == {"status": "updated", "key": "reading"}
    reading = memory_named(user, "reading")
    assert reading.summary == "The reading went well; felt confident"
    assert MemoryEvent.objects.filter(user=user, memory_id=reading.pk).last().action == "merged"


def test_an_extra_source_property_is_a_schema_error_and_nothing_is_stored(user: User) -> None:
    result = save(user, "left-shoulder", "Bad left shoulder", source="user")

    assert result["status"] == "error"
    assert "'source' was unexpected" in result["error"]
    assert not Memory.objects.filter(user=user).exists()


def test_malformed_arguments_come_back_as_a_readable_error(user: User) -> None:
    result = json.loads(run_tool(ToolContext(user=user), "save_memory", '{"key": "left-'))

    assert result["status"] == "error" and "not valid JSON" in result["error"]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"tier": "forever"}, "is not one of"),
        ({"content": "x" * 2001}, "at most 2000"),
        ({"key": "Left Shoulder"}, "lowercase words joined by hyphens"),
        ({"tier": "prospective", "due_at": "2001-01-01"}, "in the past"),
        ({"tier": "prospective", "due_at": "next summer"}, "not a month (2027-05), a date (2027-05-14)"),
        ({"tier": "prospective", "due_at": "2027-13"}, "not a month (YYYY-MM)"),
    ],
)
def test_bad_arguments_come_back_as_results_not_exceptions(user: User, fields: dict, message: str) -> None:
    arguments = {
        "key": "left-shoulder",
        "tier": "profile",
        "category": "injury",
        "summary": "Bad left shoulder",
        "content": "Bad left shoulder",
        "due_at": None,
        "keep_separate": None,
    }
    result = call(user, "save_memory", **(arguments | fields))

    assert result["status"] == "error"
    assert message in result["error"]
    assert not Memory.objects.filter(user=user).exists()


def test_a_summary_over_150_characters_is_refused_with_its_length(user: User) -> None:
    result = save(user, "left-shoulder", "x" * 151)

    assert result["status"] == "error"
    assert "is 151 characters; at most 150" in result["error"]


def test_an_unknown_tool_or_key_is_a_readable_error(user: User) -> None:
    assert "there is no tool" in json.loads(run_tool(ToolContext(user=user), "forget_everything", "{}"))["error"]
    assert "there is no memory" in call(user, "delete_memory", key="nothing", reason="x")["error"]


def test_a_prospective_save_keeps_its_date(user: User) -> None:
    due = (timezone.now() + timedelta(days=200)).date().isoformat()

    result = save(user, "talk-june", "Giving a talk", tier="prospective", due_at=due)

    assert result["status"] == "saved"
    memory = memory_named(user, "talk-june")
    assert (memory.due_at.date().isoformat(), memory.status) == (due, "open")


def test_the_coach_may_create_a_protected_memory(user: User) -> None:
    result = save(user, "allergy-nuts", "Nut allergy", category="allergy", tier="profile")

    # Kept under a neutral key, which the result gives the model: never named by its text.
    assert (result["status"], result["key"], result["created"]) == ("saved", "allergy-1", True)
    assert "'allergy-1'" in result["note"]
    memory = memory_named(user, "allergy-1")
    assert memory.source == "coach" and memory.is_protected and memory.summary == "Nut allergy"
    assert not Memory.objects.keyed(user.pk, "allergy-nuts").exists()


def test_deleting_a_recorded_allergy_makes_a_proposal_and_leaves_it_intact(user: User) -> None:
    key = save(user, "allergy-nuts", "Nut allergy", category="allergy", tier="profile")["key"]

    result = call(user, "delete_memory", key=key, reason="never mentioned again")

    assert (result["status"], result["key"]) == ("proposed", "allergy-1")
    assert "confirm" in result["message"]
    assert memory_named(user, "allergy-1").summary == "Nut allergy"
    proposal = MemoryProposal.objects.get(user=user)
    assert (proposal.kind, proposal.status, proposal.reason) == ("delete", "pending", "never mentioned again")


def test_rewriting_what_the_user_typed_makes_a_proposal(user: User) -> None:
    make_memory(user, "diet", source="user", category="preference", summary="Vegetarian")

    result = call(
        user,
        "update_memory",
        key="diet",
        summary="Eats fish now",
        content=None,
        tier=None,
        category=None,
        due_at=None,
        status=None,
        clear=None,
        reason="mentioned salmon",
    )

    assert result["status"] == "proposed"
    assert memory_named(user, "diet").summary == "Vegetarian"
    assert MemoryProposal.objects.get(user=user).proposed_fields()["summary"] == "Eats fish now"


def test_saving_over_a_protected_key_makes_a_proposal(user: User) -> None:
    make_memory(user, "left-shoulder", source="onboarding", category="injury", summary="Bad left shoulder")

    result = save(user, "left-shoulder", "Shoulder is fine now", category="other")

    assert result["status"] == "proposed"
    assert memory_named(user, "left-shoulder").summary == "Bad left shoulder"


def test_saving_over_a_protected_key_during_an_embedding_outage_still_makes_a_proposal(
    user: User, model_server: ModelServer
) -> None:
    make_memory(user, "left-shoulder", source="onboarding", category="injury", summary="Bad left shoulder")
    model_server.queue_embedding_error(503)

    result = save(user, "left-shoulder", "Shoulder is fine now", category="other")

    assert result["status"] == "proposed"
    assert MemoryProposal.objects.get(user=user).proposed_fields()["summary"] == "Shoulder is fine now"
    assert memory_named(user, "left-shoulder").summary == "Bad left shoulder"


def test_another_users_memories_are_invisible_to_every_tool(user: User, other_user: User) -> None:
    make_memory(other_user, "secret", summary="Another person's secret plan")

    assert call(user, "recall_memory", keys=["secret"]) == {"status": "found", "memories": [], "unknown": ["secret"]}
    assert call(user, "search_memories", query="secret plan", limit=None)["memories"] == []
    assert "there is no memory" in call(user, "delete_memory", key="secret", reason="x")["error"]
    update = call(
        user,
        "update_memory",
        key="secret",
        summary="mine",
        content=None,
        tier=None,
        category=None,
        due_at=None,
        status=None,
        clear=None,
        reason="x",
    )
    assert "there is no memory" in update["error"]
    assert save(user, "secret", "My own note under the same key")["status"] == "saved"
    assert memory_named(other_user, "secret").summary == "Another person's secret plan"
    assert memory_named(user, "secret").summary == "My own note under the same key"


def test_search_ranks_the_users_memories_by_meaning(user: User) -> None:
    make_memory(user, "left-shoulder", summary="Bad left shoulder, no overhead pressing")
    make_memory(user, "breakfast", summary="Oats for breakfast every day")

    found = call(user, "search_memories", query="shoulder pressing", limit=2)["memories"]

    assert [m["key"] for m in found] == ["left-shoulder", "breakfast"]
    assert found[0]["similarity"] > found[1]["similarity"]


def test_a_search_costs_two_queries_however_many_it_finds_and_shows_no_notes(
    user: User, django_assert_num_queries
) -> None:
    for n in range(12):
        make_memory(user, f"note-{n}", summary=f"Shoulder note {n}", content=f"The whole note {n}, long.")
    context = ToolContext(user=user)

    # Whether any memory is embedded by another model (once a turn), then the search.
    with django_assert_num_queries(2) as queries:
        found = call(user, "search_memories", context, query="shoulder", limit=None)["memories"]
    with django_assert_num_queries(1):
        call(user, "search_memories", context, query="knee", limit=None)

    assert len(found) == 8
    assert all(set(match) == {"key", "tier", "category", "summary", "similarity", "found_by"} for match in found)
    # The notes themselves are neither read nor decrypted.
    assert '"memory_memory"."content"' not in queries.captured_queries[-1]["sql"]


def test_a_new_memory_is_one_transaction_after_its_reads_and_one_embedding(
    transactional_db: None, user: User, model_server: ModelServer
) -> None:
    # Outside a test's transaction, as in production: no savepoints among the queries.
    make_memory(user, "breakfast", summary="Oats for breakfast every day")
    embeddings_before = sum(1 for request in model_server.requests if request.path.endswith("/embeddings"))

    with CaptureQueriesContext(connection) as captured:
        assert save(user, "swims", "Swims on Tuesdays")["status"] == "saved"

    # Whether any memory is embedded by another model, the key, its near-copies (by words and
    # meaning, one statement); then, in one transaction, the person's row locked (where a
    # turn's call asks whether the turn is still under way: ToolContext.writing), and within
    # it the write as every writer makes it: the row locked again, the key (locked) and the
    # store read after it, then the memory and its event inserted.
    statements = [query["sql"].split()[0] for query in captured.captured_queries]
    assert statements == [
        *["SELECT"] * 2,
        "WITH",
        "BEGIN",
        "SELECT",
        "SAVEPOINT",
        *["SELECT"] * 3,
        *["INSERT"] * 2,
        "RELEASE",
        "COMMIT",
    ]
    assert sum(1 for request in model_server.requests if request.path.endswith("/embeddings")) == embeddings_before + 1
    event = MemoryEvent.objects.get(user=user, memory_id=memory_named(user, "swims").pk)
    assert (event.action, event.actor, event.after_fields()["summary"]) == ("created", "coach", "Swims on Tuesdays")


def test_saving_again_under_the_same_key_is_an_update_never_a_copy_of_itself(user: User) -> None:
    context = ToolContext(user=user)
    assert save(user, "swims", "Swims on Tuesdays", context=context)["status"] == "saved"

    again = save(user, "swims", "Swims on Tuesdays", context=context, content="Swims on Tuesdays at the lido")

    assert (again["status"], again["created"]) == ("saved", False)
    assert memory_named(user, "swims").content == "Swims on Tuesdays at the lido"
    assert Memory.objects.filter(user=user).count() == 1


def test_the_same_save_again_changes_nothing_and_says_unchanged(user: User) -> None:
    # A turn killed after its save ran, then retried, sends the very same save again.
    first = ToolContext(user=user)
    assert save(user, "swims", "Swims on Tuesdays", context=first)["status"] == "saved"
    retry = ToolContext(user=user)

    again = save(user, "swims", "Swims on Tuesdays", context=retry)

    assert again == {"status": "unchanged", "key": "swims"}
    assert retry.changes == [] and retry.writes == 0
    memory = memory_named(user, "swims")
    assert list(MemoryEvent.objects.filter(user=user, memory_id=memory.pk).values_list("action", flat=True)) == [
        "created"
    ]


def test_the_same_safety_note_saved_again_is_unchanged_not_a_second_neutral_copy(user: User) -> None:
    fields = {"tier": "profile", "category": "allergy"}
    assert save(user, "peanuts", "Allergic to peanuts", **fields)["status"] == "saved"
    retry = ToolContext(user=user)

    again = save(user, "peanuts", "Allergic to peanuts", context=retry, **fields)

    assert again["status"] == "unchanged" and again["key"] != "peanuts"
    assert Memory.objects.filter(user=user).count() == 1
    assert MemoryEvent.objects.filter(user=user).count() == 1
    assert retry.changes == []


def test_recall_opens_full_notes_by_key(user: User) -> None:
    make_memory(
        user,
        "coaching-style",
        category="feedback",
        summary="Blunt feedback",
        content="Be blunt.\nWhy: they asked.\nHow to apply: no cushioning.",
    )

    result = call(user, "recall_memory", keys=["coaching-style", "missing"])

    assert result["memories"][0]["content"] == "Be blunt.\nWhy: they asked.\nHow to apply: no cushioning."
    assert (result["memories"][0]["by"], result["memories"][0]["protected"]) == ("you", False)
    assert result["unknown"] == ["missing"]


def test_writes_stop_at_the_per_turn_limit(user: User, settings) -> None:
    settings.MEMORY_MAX_WRITES_PER_TURN = 2
    context = ToolContext(user=user)

    results = [save(user, f"note-{n}", f"Different topic number {n} {'x' * n}", context=context) for n in range(3)]

    assert [r["status"] for r in results] == ["saved", "saved", "error"]
    assert "at most 2 memory writes per turn" in results[2]["error"]
    assert call(user, "recall_memory", context, keys=["note-0"])["memories"]


def test_searches_and_recalls_stop_at_the_per_turn_limit_and_say_what_to_do(
    user: User, settings, model_server: ModelServer
) -> None:
    settings.MEMORY_MAX_READS_PER_TURN = 3
    make_memory(user, "left-shoulder", summary="Bad left shoulder")
    context = ToolContext(user=user)

    results = [
        call(user, "search_memories", context, query="shoulder", limit=None),
        call(user, "recall_memory", context, keys=["left-shoulder"]),
        call(user, "search_memories", context, query="knee", limit=None),
        call(user, "recall_memory", context, keys=["left-shoulder"]),
        call(user, "search_memories", context, query="hip", limit=None),
    ]
    write = save(user, "talk", "Giving a talk in June", context=context)

    assert [r["status"] for r in results] == ["found", "found", "found", "read_limit", "read_limit"]
    assert "at most 3 times" in results[-1]["message"] and "Answer now with what you found" in results[-1]["message"]
    assert len(model_server.embedding_requests()) == 2 + 1, "two searches embedded their query, then the save"
    assert write["status"] == "saved", "writes have their own limit"


def test_refused_saves_leave_the_turns_writes_for_the_real_one(user: User, settings) -> None:
    settings.MEMORY_MAX_WRITES_PER_TURN = 3
    context = ToolContext(user=user)
    assert save(user, "club-runs", "Runs with her club on Saturdays", context=context)["status"] == "saved"
    # Three near-copies the dedup check refuses, then a new fact.
    refused = [save(user, f"club-{n}", "Runs with the club on Saturdays", context=context) for n in range(3)]

    real = save(user, "talk", "Giving a talk in June", context=context)

    assert [r["status"] for r in refused] == ["not_saved"] * 3
    assert real["status"] == "saved" and context.writes == 2


def test_a_turn_cannot_ask_for_writes_without_end(user: User, settings) -> None:
    settings.MEMORY_MAX_WRITES_PER_TURN = 2
    context = ToolContext(user=user)
    save(user, "club-runs", "Runs with her club on Saturdays", context=context)

    results = [save(user, f"club-{n}", "Runs with the club on Saturdays", context=context) for n in range(8)]

    assert [r["status"] for r in results[:5]] == ["not_saved"] * 5
    assert {r["status"] for r in results[5:]} == {"error"}
    assert "too many memory writes" in results[-1]["error"]


def test_an_embedding_outage_is_a_result_the_turn_survives(user: User, model_server: ModelServer) -> None:
    model_server.queue_embedding_error(503)

    result = save(user, "left-shoulder", "Bad left shoulder")

    assert result["status"] == "not_saved"
    assert result["reason"].startswith("memory could not be reached just now (the model answered 503")
    assert result["reason"].endswith("nothing was saved or changed")
    assert not Memory.objects.filter(user=user).exists()


def test_memories_the_coach_saves_come_from_the_turns_session(user: User) -> None:
    from coach.models import ChatSession, Message

    session = ChatSession.objects.create(user=user)
    message = Message.objects.create(session=session, role="user", content="I have a bad left shoulder")

    save(
        user,
        "left-shoulder",
        "Bad left shoulder",
        context=ToolContext(user=user, session_id=session.pk, message_id=message.pk),
    )

    memory = memory_named(user, "left-shoulder")
    assert (memory.session_id, memory.message_id, memory.source) == (session.pk, message.pk, "coach")
