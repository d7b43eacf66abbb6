"""An undo token is void once the person has deleted all their memories: it would bring
back what they asked to have forgotten (issue 36)."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import User
from memory.models import Memory
from tests.accounts.staff import signed_in_just_now
from tests.accounts.test_memory_undo import token_in
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def test_an_undo_from_before_deleting_all_memories_brings_nothing_back(user: User) -> None:
    client = signed_in_just_now(Client(), user)
    memory = make_memory(user, "breakfast", summary="Oats every morning")
    token = token_in(client.post(f"/memories/{memory.pk}/delete", headers=HTMX).content.decode())
    assert client.post("/account/delete-memories").status_code == 302

    response = client.post("/memories/undo-delete", {"token": token, "memory_id": memory.pk}, headers=HTMX)

    assert response.status_code == 409
    assert "You deleted all your memories since" in response.content.decode()
    assert not Memory.objects.filter(user=user).exists()
