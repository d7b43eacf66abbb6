"""Memories in the Django admin: filters, and an admin's edit recorded as the admin's."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import User
from memory.models import Memory, MemoryEvent
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(db: None) -> Client:
    admin = User.objects.create_superuser("admin@example.com", "admin-password")
    client = Client()
    client.force_login(admin)
    return client


def test_the_admin_filters_memories_by_protection(admin_client: Client, user: User) -> None:
    make_memory(user, "left-shoulder", source="user", category="injury")
    make_memory(user, "breakfast", source="coach", category="habit")

    protected = admin_client.get("/admin/memory/memory/?protected=yes").content.decode()
    unprotected = admin_client.get("/admin/memory/memory/?protected=no").content.decode()

    assert "left-shoulder" in protected and "breakfast" not in protected
    assert "breakfast" in unprotected and "left-shoulder" not in unprotected


@pytest.mark.parametrize("query", ["tier__exact=profile", "category__exact=injury", "source__exact=user", "q=shoulder"])
def test_the_admin_lists_filter_and_search(admin_client: Client, user: User, query: str) -> None:
    make_memory(user, "left-shoulder", source="user", category="injury", tier="profile")

    response = admin_client.get(f"/admin/memory/memory/?{query}")

    assert response.status_code == 200
    assert "left-shoulder" in response.content.decode()


def test_an_admins_edit_goes_through_the_service_as_the_admin(admin_client: Client, user: User) -> None:
    memory = make_memory(user, "breakfast", summary="Oats", content="Oats daily")

    response = admin_client.post(
        f"/admin/memory/memory/{memory.pk}/change/",
        {
            "tier": "episodic",
            "category": "habit",
            "summary": "Eggs",
            "content": "Eggs daily",
            "due_at_0": "",
            "due_at_1": "",
            "status": "",
            "events-TOTAL_FORMS": "0",
            "events-INITIAL_FORMS": "0",
        },
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    stored = Memory.objects.get(pk=memory.pk)
    assert (stored.summary, stored.version) == ("Eggs", memory.version + 1)
    event = MemoryEvent.objects.filter(key="breakfast").last()
    assert (event.actor, event.action) == ("admin", "updated")


def test_history_in_the_admin_is_read_only(admin_client: Client, user: User) -> None:
    assert admin_client.get("/admin/memory/memoryevent/add/").status_code == 403
