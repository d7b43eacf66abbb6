"""No staff edit makes a protected memory unprotected (DESIGN.md section 8): a staff change
to a protected memory becomes a suggestion the person confirms, like the coach's, and
staff cannot delete it; the coach's later delete stays a suggestion too."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from accounts.models import User
from memory.models import Memory, MemoryProposal
from memory.tools import ToolContext, run_tool
from tests.accounts.staff import staff_client
from tests.accounts.test_admin_security import staff
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db

SUPPORT = ["accounts.view_user", "accounts.change_user", "memory.view_memory", "memory.change_memory"]


def allergy(user: User) -> Memory:
    return make_memory(
        user, "allergy-1", source="onboarding", category="allergy", tier="profile", summary="Severe peanut allergy"
    )


def test_a_staff_change_of_category_leaves_a_protected_memory_protected_and_asks_the_person(user: User) -> None:
    memory = allergy(user)
    client = staff_client(staff(permissions=[*SUPPORT, "memory.delete_memory"]))
    form = {"tier": "profile", "category": "other", "due_at_0": "", "due_at_1": "", "status": ""}

    response = client.post(f"/admin/memory/memory/{memory.pk}/change/", form, follow=True)

    assert "it was not changed" in response.content.decode()
    kept = Memory.objects.get(pk=memory.pk)
    assert (kept.source, kept.category, kept.version, kept.is_protected) == ("onboarding", "allergy", 1, True)
    [proposal] = MemoryProposal.objects.filter(user=user)
    assert (proposal.kind, proposal.suggested_by, proposal.status) == ("update", "admin", "pending")
    person = Client()
    person.force_login(user)
    assert "Suggested by our support team" in person.get("/memories/").content.decode()

    deleted = run_tool(ToolContext(user=user), "delete_memory", json.dumps({"key": kept.key, "reason": "outgrown"}))

    assert json.loads(deleted)["status"] == "proposed"
    assert Memory.objects.filter(pk=memory.pk).exists()


def test_staff_cannot_delete_a_protected_memory(user: User) -> None:
    memory = allergy(user)
    client = staff_client(staff(permissions=[*SUPPORT, "memory.delete_memory"]))

    assert client.post(f"/admin/memory/memory/{memory.pk}/delete/", {"post": "yes"}).status_code == 403
    assert Memory.objects.filter(pk=memory.pk).exists()


def test_staff_still_change_an_unprotected_coach_note_in_place(user: User) -> None:
    note = make_memory(user, "breakfast", source="coach", category="habit")
    client = staff_client(staff(permissions=SUPPORT))
    form = {"tier": "episodic", "category": "preference", "due_at_0": "", "due_at_1": "", "status": ""}

    assert client.post(f"/admin/memory/memory/{note.pk}/change/", form).status_code == 302

    assert Memory.objects.get(pk=note.pk).category == "preference"
    assert not MemoryProposal.objects.exists()
