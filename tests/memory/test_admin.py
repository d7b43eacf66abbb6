"""Memories in the Django admin: filters, and an admin's edit recorded as the admin's."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import User
from memory.models import Memory, MemoryEvent
from tests.accounts.staff import staff_client
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(db: None) -> Client:
    return staff_client(User.objects.create_superuser("admin@example.com", "admin-password"))


def give_reason(client: Client, memory: Memory) -> None:
    """Say why the person's private text must be read (a support request)."""
    reason = {"private_text_reason": "support request about a wrong memory"}
    assert client.post(f"/admin/memory/memory/{memory.pk}/change/", reason).status_code == 302


def change_link(memory: Memory) -> str:
    return f'href="/admin/memory/memory/{memory.pk}/change/'


def test_the_admin_filters_memories_by_protection(admin_client: Client, user: User) -> None:
    shoulder = make_memory(user, "left-shoulder", source="user", category="injury")
    breakfast = make_memory(user, "breakfast", source="coach", category="habit")

    protected = admin_client.get("/admin/memory/memory/?protected=yes").content.decode()
    unprotected = admin_client.get("/admin/memory/memory/?protected=no").content.decode()

    # Listed by id: a key says as much as the note, so the list shows none.
    assert change_link(shoulder) in protected and change_link(breakfast) not in protected
    assert change_link(breakfast) in unprotected and change_link(shoulder) not in unprotected
    assert "left-shoulder" not in protected + unprotected and "breakfast" not in protected + unprotected


@pytest.mark.parametrize(
    "query", ["tier__exact=profile", "category__exact=injury", "source__exact=user", "q=ada%40example.com"]
)
def test_the_admin_lists_filter_and_search(admin_client: Client, user: User, other_user: User, query: str) -> None:
    memory = make_memory(user, "left-shoulder", source="user", category="injury", tier="profile")
    others = make_memory(other_user, "breakfast", source="coach", category="habit", tier="episodic")

    response = admin_client.get(f"/admin/memory/memory/?{query}")

    assert response.status_code == 200
    html = response.content.decode()
    assert change_link(memory) in html and change_link(others) not in html
    assert "left-shoulder" not in html


def test_an_admins_edit_goes_through_the_service_as_the_admin(admin_client: Client, user: User) -> None:
    memory = make_memory(user, "breakfast", summary="Oats", content="Oats daily")
    give_reason(admin_client, memory)

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
        },
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    stored = Memory.objects.get(pk=memory.pk)
    assert (stored.summary, stored.version) == ("Eggs", memory.version + 1)
    event = MemoryEvent.objects.filter(memory_id=memory.pk).last()
    assert (event.actor, event.action, event.key) == ("admin", "updated", "breakfast")
    assert stored.source == "admin", "what staff write is never passed off as the person's"


def test_an_admins_edit_is_embedded_before_the_admins_transaction_and_refused_whole_if_it_cannot_be(
    admin_client: Client, user: User, model_server
) -> None:
    """The admin saves inside a transaction; the model gateway refuses to be called inside
    one, so this edit saving at all shows the embedding was asked for first."""
    memory = make_memory(user, "breakfast", summary="Oats", content="Oats daily")
    form = {"tier": "episodic", "category": "habit", "summary": "Eggs", "content": "Eggs daily"}
    form |= {"due_at_0": "", "due_at_1": "", "status": ""}
    model_server.queue_embedding_error(503)
    give_reason(admin_client, memory)

    refused = admin_client.post(f"/admin/memory/memory/{memory.pk}/change/", form, follow=True)

    assert "Not saved: the embedding model could not be reached" in refused.content.decode()
    assert Memory.objects.get(pk=memory.pk).summary == "Oats"
    assert admin_client.post(f"/admin/memory/memory/{memory.pk}/change/", form).status_code == 302
    assert Memory.objects.get(pk=memory.pk).summary == "Eggs"


def test_the_model_is_never_called_inside_a_transaction(transactional_db: None) -> None:
    from django.db import transaction

    from infra import llm

    with transaction.atomic(), pytest.raises(llm.ModelCallInTransaction):
        llm.embed(["a text"])


def test_an_admins_deletion_goes_through_the_service_as_the_admin(admin_client: Client, user: User) -> None:
    memory = make_memory(user, "breakfast", summary="Oats", content="Oats daily")
    give_reason(admin_client, memory)

    response = admin_client.post(f"/admin/memory/memory/{memory.pk}/delete/", {"post": "yes"})

    assert response.status_code == 302, response.content.decode()[:2000]
    assert not Memory.objects.filter(pk=memory.pk).exists()
    event = MemoryEvent.objects.get(memory_id=memory.pk)
    assert (event.actor, event.action, event.key) == ("admin", "deleted", "breakfast")
    assert event.reason == "deleted by admin@example.com" and event.before_fields()["summary"] == "Oats"


def test_history_in_the_admin_is_read_only(admin_client: Client, user: User) -> None:
    assert admin_client.get("/admin/memory/memoryevent/add/").status_code == 403
