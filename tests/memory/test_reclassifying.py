"""The coach cannot move a note into a protected category in place (DESIGN.md section 3.1,
rule 4): a save or update that would make an unprotected note protected becomes a
suggestion the person confirms, so a model cannot lock the store with its own notes."""

from __future__ import annotations

import json

import pytest

from accounts.models import User
from memory.models import Memory, MemoryProposal
from memory.tools import ToolContext, run_tool
from offline_coach import ModelServer
from tests.memory.factories import make_memories

pytestmark = pytest.mark.django_db

LONG = "Takes a daily medication for a heart condition. " * 42  # about 2,000 characters


def call(user: User, name: str, **arguments: object) -> dict:
    return json.loads(run_tool(ToolContext(user=user), name, json.dumps(arguments)))


def save(user: User, key: str, *, category: str, summary: str, content: str) -> dict:
    arguments = {"key": key, "tier": "episodic", "category": category, "summary": summary, "content": content}
    return call(user, "save_memory", **arguments, due_at=None, keep_separate=None)


def test_saving_medical_over_59_coach_notes_leaves_them_unprotected_and_the_store_open(
    user: User, model_server: ModelServer
) -> None:
    notes = make_memories(user, 59)

    results = [
        save(user, note.key, category="medical", summary=f"Medical note {i}", content=LONG[:2000])
        for i, note in enumerate(notes)
    ]

    assert {result["status"] for result in results} == {"proposed"}
    assert not Memory.objects.filter(user=user).protected().exists()
    assert MemoryProposal.objects.filter(user=user, status="pending").count() == 59
    later = [save(user, f"plan-{i}", category="project", summary=f"Plan {i}", content="") for i in range(3)]
    assert [result["status"] for result in later] == ["saved"] * 3, later
    assert Memory.objects.filter(user=user).count() == 60


def test_updating_a_coach_note_into_a_protected_category_is_a_suggestion(user: User, model_server: ModelServer) -> None:
    [note] = make_memories(user, 1)

    result = call(
        user,
        "update_memory",
        key=note.key,
        summary=None,
        content=None,
        tier=None,
        category="allergy",
        due_at=None,
        status=None,
        clear=None,
        reason="it is an allergy",
    )

    assert result["status"] == "proposed" and "only the person may decide" in result["message"]
    assert Memory.objects.get(pk=note.pk).category == "habit"
    assert MemoryProposal.objects.get(user=user).kind == "update"


def test_a_new_coach_note_in_a_protected_category_is_still_saved(user: User, model_server: ModelServer) -> None:
    result = save(user, "peanuts", category="allergy", summary="Allergic to peanuts", content="")

    assert result["status"] == "saved"
    assert Memory.objects.get(user=user).is_protected
