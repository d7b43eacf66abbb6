"""What one person may repeat on their pages. Their own memories may pass the coach's
ceiling, but not without end (MEMORY_MAX_PER_PERSON): past it, every way of adding one says
why and saves nothing. And every change they can repeat (adding, editing, deleting,
confirming, restoring, undoing, deleting a conversation, ...) is counted per person
(CHANGES_PER_MINUTE): past it, a 429 that says to wait, and nothing changes."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.test import Client

from accounts.models import User
from coach.models import ChatSession
from memory.drafts import MemoryDraft
from memory.models import Memory, MemoryProposal
from memory.proposals import proposal_make
from memory.services import memory_delete
from memory.undo import undo_token
from offline_coach import ModelServer
from tests.accounts.test_memory_actions import evict_oldest
from tests.coach.factories import make_session
from tests.conftest import make_user
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
FULL = "You have 62 memories, the most your coach keeps for one person."
TOO_MANY = "That is a lot of changes in a minute."


@pytest.fixture
def client(client: Client, user: User) -> Client:
    client.force_login(user)
    return client


def kept_for_good(user: User, count: int) -> None:
    for number in range(count):
        make_memory(user, f"typed-{number}", source="user", category="preference", summary=f"Typed {number}")


# What one person may keep -----------------------------------------------------------------


def test_a_person_may_add_past_the_ceiling_until_the_most_one_person_keeps(
    client: Client, user: User, settings
) -> None:
    settings.MEMORY_MAX_PER_PERSON = 62
    kept_for_good(user, 61)
    form = {"summary": "Plays the cello", "content": "", "tier": "profile", "category": "preference"}

    added = client.post("/memories/add", form)
    refused = client.post("/memories/add", {**form, "summary": "Plays the viola"}, headers=HTMX)

    assert added.status_code == 302
    assert refused.status_code == 200 and FULL in refused.content.decode()
    assert "nothing was saved" in refused.content.decode()
    assert Memory.objects.filter(user=user).count() == 62


def test_restoring_a_forgotten_memory_into_a_full_store_says_why_and_restores_nothing(
    client: Client, user: User, settings
) -> None:
    forgotten = evict_oldest(user, settings)
    settings.MEMORY_MAX_PER_PERSON = 4
    kept_for_good(user, 4)

    response = client.post(f"/memories/forgotten/{forgotten.pk}/restore", headers=HTMX)

    assert "You have 4 memories, the most your coach keeps for one person" in response.content.decode()
    assert not Memory.objects.filter(pk=forgotten.memory_id).exists()


def test_an_undo_into_a_full_store_says_why_and_brings_nothing_back(client: Client, user: User, settings) -> None:
    settings.MEMORY_MAX_PER_PERSON = 62
    kept_for_good(user, 62)
    first = Memory.objects.filter(user=user).first()
    token = undo_token(memory_delete(user=user, memory_id=first.pk, actor="user"))
    make_memory(user, "typed-again", source="user", category="preference")

    response = client.post("/memories/undo-delete", {"token": token, "memory_id": first.pk}, headers=HTMX)

    assert response.status_code == 409 and FULL in response.content.decode()
    assert not Memory.objects.filter(pk=first.pk).exists()


def test_an_import_past_the_most_one_person_keeps_saves_none_of_it(
    client: Client, user: User, settings, model_server: ModelServer
) -> None:
    settings.MEMORY_MAX_PER_PERSON = 62
    kept_for_good(user, 61)
    form = {"fact-TOTAL_FORMS": "2", "fact-INITIAL_FORMS": "2", "text": "Cello\nViola"}
    for number, summary in enumerate(["Plays the cello", "Plays the viola"]):
        form |= {f"fact-{number}-keep": "on", f"fact-{number}-summary": summary, f"fact-{number}-details": ""}
        form |= {f"fact-{number}-category": "preference", f"fact-{number}-tier": "profile"}

    response = client.post("/memories/import/save", form)

    assert response.status_code == 200 and FULL in response.content.decode()
    assert Memory.objects.filter(user=user).count() == 61


# How often a person may change things -----------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One change a person can repeat: where it posts, with what, for their `user`."""

    name: str
    post: Callable[[User], tuple[str, dict[str, str]]]


NUMBERS = itertools.count()


def _memory(user: User) -> Memory:
    return make_memory(user, f"coach-{next(NUMBERS)}", summary="Runs at dawn")


def _proposal(user: User) -> int:
    memory = _memory(user)
    draft = MemoryDraft(key=memory.key, tier="episodic", category="habit", summary="Runs at dusk", content="")
    return proposal_make(user=user, memory=memory, kind="update", draft=draft, reason="said so").pk


CHANGES = [
    Change("add", lambda u: ("/memories/add", {"summary": "Plays the cello", "tier": "profile", "category": "other"})),
    Change("edit", lambda u: (f"/memories/{_memory(u).pk}/edit", {"summary": "New", "version": "1"})),
    Change("delete", lambda u: (f"/memories/{_memory(u).pk}/delete", {})),
    Change("keep", lambda u: (f"/memories/{_memory(u).pk}/keep", {})),
    Change("confirm", lambda u: (f"/memories/proposals/{_proposal(u)}/confirm", {})),
    Change("reject", lambda u: (f"/memories/proposals/{_proposal(u)}/reject", {})),
    Change("undo", lambda u: ("/memories/undo-delete", {"token": "not-a-token", "memory_id": "1"})),
    Change("restore", lambda u: ("/memories/forgotten/999999/restore", {})),
    Change("delete conversation", lambda u: (f"/chat/{make_session(u, 'Hi', 'Hello').pk}/delete", {})),
    Change("end conversation", lambda u: (f"/chat/{make_session(u, 'Hi', 'Hello').pk}/end", {})),
    Change("memory setting", lambda u: ("/account/memory", {"memory": "off" if u.memory_enabled else "on"})),
    Change("email preferences", lambda u: ("/account/email-preferences", {"frequency": "weekly"})),
]


@pytest.mark.parametrize("change", CHANGES, ids=[change.name for change in CHANGES])
def test_each_change_past_the_limit_is_a_429_that_says_to_wait_and_changes_nothing(
    client: Client, user: User, settings, change: Change
) -> None:
    settings.CHANGES_PER_MINUTE = 3
    for _ in range(3):
        url, data = change.post(user)
        assert client.post(url, data, headers=HTMX).status_code != 429

    user.refresh_from_db()
    url, data = change.post(user)
    rows = rows_of(user)
    refused = client.post(url, data, headers=HTMX)
    plain = client.post(url, data)

    assert refused.status_code == 429 and TOO_MANY in refused.content.decode()
    # Shown where the page says what went wrong, whatever the form meant to replace.
    assert (refused["HX-Retarget"], refused["HX-Reswap"]) == ("#page-alert", "innerHTML")
    assert plain.status_code == 429 and TOO_MANY in plain.content.decode() and "<html" in plain.content.decode()
    assert rows_of(user) == rows, "a refused change changed something"


def rows_of(user: User) -> tuple[object, ...]:
    memories = tuple(Memory.objects.filter(user=user).order_by("pk").values_list("pk", "version", "source"))
    proposals = tuple(MemoryProposal.objects.filter(user=user).order_by("pk").values_list("pk", "status"))
    sessions = tuple(ChatSession.objects.filter(user=user).order_by("pk").values_list("pk", "ended_at"))
    user.refresh_from_db()
    return memories, proposals, sessions, user.memory_enabled


def test_changes_are_counted_per_person_across_kinds(client: Client, user: User, settings) -> None:
    settings.CHANGES_PER_MINUTE = 2
    other = Client()
    other.force_login(make_user("other@example.com"))

    kept = client.post(f"/memories/{make_memory(user, 'a').pk}/keep", headers=HTMX)
    deleted = client.post(f"/memories/{make_memory(user, 'b').pk}/delete", headers=HTMX)
    added = client.post("/memories/add", {"summary": "Cello", "tier": "profile", "category": "other"}, headers=HTMX)
    theirs = other.post("/memories/add", {"summary": "Viola", "tier": "profile", "category": "other"}, headers=HTMX)

    assert [kept.status_code, deleted.status_code, added.status_code] == [200, 200, 429]
    assert theirs.status_code == 200


def test_a_burst_of_additions_past_the_limit_asks_the_model_for_no_more_embeddings(
    client: Client, user: User, settings, model_server: ModelServer
) -> None:
    settings.CHANGES_PER_MINUTE = 5

    answers = [
        client.post("/memories/add", {"summary": f"Fact {n}", "tier": "profile", "category": "other"}).status_code
        for n in range(40)
    ]

    assert answers.count(302) == 5 and answers.count(429) == 35
    assert len(model_server.embedding_requests()) == 5
    assert Memory.objects.filter(user=user).count() == 5
