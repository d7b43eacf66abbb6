"""Deleted · Undo: a deleted memory comes back exactly as it was, for a while, from what the
person's page holds; the server keeps nothing of it, and nobody else can bring it back."""

from __future__ import annotations

import html as html_text
import re
from datetime import timedelta

import numpy
import pytest
from django.apps import apps
from django.test import Client
from django.utils import timezone

from accounts.models import LoginSession, User
from infra.llm import Embedding
from memory.drafts import MemoryDraft
from memory.models import Memory, MemoryEvent
from memory.services import memory_add_by_user, memory_delete, memory_save, memory_undo_delete
from memory.undo import UndoRefused, undo_token
from offline_coach import ModelServer, bag_of_words_embedding
from tests.memory.factories import make_memories, make_memory

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
COLUMNS = (
    "pk",
    "user_id",
    "key",
    "tier",
    "category",
    "source",
    "summary",
    "content",
    "due_at",
    "status",
    "raised_at",
    "session_id",
    "message_id",
    "version",
    "created_at",
    "updated_at",
    "embedding_model",
)


@pytest.fixture
def client(client: Client, user: User) -> Client:
    client.force_login(user)
    return client


def columns(memory: Memory) -> dict[str, object]:
    return {name: getattr(memory, name) for name in COLUMNS}


def talk(user: User) -> Memory:
    """A memory with every column set: an intention, raised once, from a chat message."""
    memory = make_memory(
        user,
        "talk-june",
        tier="prospective",
        category="project",
        summary="Giving a talk in June",
        content="Giving a talk in June at the library\nabout the memoir",
        due_at=timezone.now() + timedelta(days=40),
        status="raised",
        updated_at=timezone.now() - timedelta(days=3),
    )
    Memory.objects.filter(pk=memory.pk).update(
        raised_at=timezone.now() - timedelta(days=1),
        session_id=7,
        message_id=11,
        version=4,
        created_at=timezone.now() - timedelta(days=20),
    )
    return Memory.objects.get(pk=memory.pk)


def token_in(page: str) -> str:
    match = re.search(r'<input type="hidden" name="token" value="([^"]+)">', page)
    assert match, "no Undo on the page"
    return html_text.unescape(match.group(1))


def counts(page: str) -> str:
    match = re.search(r'<ul class="stats" id="memory-counts".*?</ul>', page, re.S)
    assert match, "no counts"
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", match.group(0))).strip()


# The service ----------------------------------------------------------------------------


def test_deleted_memory_comes_back_exactly_with_undo(user: User, model_server: ModelServer) -> None:
    memory = talk(user)
    was, vector = columns(memory), numpy.array(memory.embedding)
    token = undo_token(memory_delete(user=user, memory_id=memory.pk, actor="user"))
    assert not Memory.objects.filter(pk=memory.pk).exists()
    calls = len(model_server.requests)

    back = memory_undo_delete(user=user, token=token)

    stored = Memory.objects.get(pk=memory.pk)
    assert columns(stored) == was == columns(back)
    assert numpy.array_equal(numpy.array(stored.embedding), vector)
    # The embedding came back with it: no model was asked.
    assert len(model_server.requests) == calls
    last = MemoryEvent.objects.filter(user=user, memory_id=memory.pk).last()
    assert (last.actor, last.action, last.reason) == ("user", "restored", "you undid deleting it")


def test_an_undo_brings_back_the_persons_own_memory_under_its_name(user: User) -> None:
    typed = memory_add_by_user(
        user=user,
        draft=MemoryDraft(key="", tier="profile", category="allergy", summary="Allergic to peanuts", content=""),
    )
    token = undo_token(memory_delete(user=user, memory_id=typed.pk, actor="user"))

    back = memory_undo_delete(user=user, token=token)

    assert (back.pk, back.key, back.source, back.summary) == (typed.pk, "allergy-1", "user", "Allergic to peanuts")
    assert back.is_protected


def test_undoing_twice_gives_the_memory_back_once(user: User) -> None:
    memory = make_memory(user, "breakfast", summary="Oats every morning")
    token = undo_token(memory_delete(user=user, memory_id=memory.pk, actor="user"))

    first = memory_undo_delete(user=user, token=token)
    second = memory_undo_delete(user=user, token=token)

    assert first.pk == second.pk == memory.pk
    assert Memory.objects.filter(user=user).count() == 1
    assert MemoryEvent.objects.filter(user=user, action="restored").count() == 1


def test_another_persons_undo_is_refused(user: User, other_user: User) -> None:
    memory = make_memory(user, "breakfast", summary="Oats every morning")
    token = undo_token(memory_delete(user=user, memory_id=memory.pk, actor="user"))

    with pytest.raises(UndoRefused, match="belongs to another account"):
        memory_undo_delete(user=other_user, token=token)

    assert not Memory.objects.filter(pk=memory.pk).exists()
    assert not Memory.objects.filter(user=other_user).exists()


def test_an_undo_after_ten_minutes_is_refused(user: User) -> None:
    memory = make_memory(user, "breakfast", summary="Oats every morning")
    deleted_at = timezone.now()
    token = undo_token(memory_delete(user=user, memory_id=memory.pk, actor="user", now=deleted_at))

    with pytest.raises(UndoRefused, match="Too late to undo: a deletion can be undone for 10 minutes"):
        memory_undo_delete(user=user, token=token, now=deleted_at + timedelta(minutes=10, seconds=1))

    assert memory_undo_delete(user=user, token=token, now=deleted_at + timedelta(minutes=9)).pk == memory.pk


def flip(token: str, at: int) -> str:
    return token[:at] + ("x" if token[at] != "x" else "y") + token[at + 1 :]


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda token: flip(token, len(token) - 2), id="signature"),
        pytest.param(lambda token: re.sub(r"^\d+", lambda owner: str(int(owner[0]) + 1), token), id="owner"),
        pytest.param(lambda token: token.replace(".", ".9", 1), id="memory id"),
        pytest.param(lambda token: flip(token, len(token) // 2), id="sealed text"),
        pytest.param(lambda token: "", id="empty"),
        pytest.param(lambda token: "not a token at all", id="nonsense"),
    ],
)
def test_a_tampered_undo_is_refused(user: User, tamper) -> None:
    memory = make_memory(user, "breakfast", summary="Oats every morning")
    token = undo_token(memory_delete(user=user, memory_id=memory.pk, actor="user"))

    with pytest.raises(UndoRefused, match="This undo is damaged, so nothing was restored"):
        memory_undo_delete(user=user, token=tamper(token))

    assert not Memory.objects.filter(user=user).exists()


def test_an_undo_is_refused_when_the_coach_saved_the_same_name_meanwhile(user: User) -> None:
    memory = make_memory(user, "breakfast", summary="Oats every morning")
    token = undo_token(memory_delete(user=user, memory_id=memory.pk, actor="user"))
    memory_save(
        user=user,
        draft=MemoryDraft(key="breakfast", tier="episodic", category="habit", summary="Eggs now", content="Eggs now"),
        source="coach",
        actor="coach",
        embedding=Embedding(bag_of_words_embedding("Eggs now"), "bag-of-words"),
    )

    with pytest.raises(UndoRefused, match="under the same name since you deleted this"):
        memory_undo_delete(user=user, token=token)

    assert [m.summary for m in Memory.objects.filter(user=user)] == ["Eggs now"]


def test_a_neutral_name_taken_meanwhile_is_no_reason_to_refuse(user: User) -> None:
    draft = MemoryDraft(key="", tier="profile", category="habit", summary="Oats every morning", content="")
    first = memory_add_by_user(user=user, draft=draft)
    token = undo_token(memory_delete(user=user, memory_id=first.pk, actor="user"))
    memory_add_by_user(user=user, draft=MemoryDraft(**{**draft.__dict__, "summary": "Runs at dawn"}))

    back = memory_undo_delete(user=user, token=token)

    assert (back.pk, back.summary, back.key) == (first.pk, "Oats every morning", "habit-2")


def test_an_undo_past_the_ceiling_keeps_the_memory_and_the_coach_forgets_its_oldest(user: User, settings) -> None:
    settings.MEMORY_MAX_STORED = 2
    oldest, middle = make_memories(user, 2)
    token = undo_token(memory_delete(user=user, memory_id=oldest.pk, actor="user"))
    memory_save(
        user=user,
        draft=MemoryDraft(key="newest", tier="episodic", category="habit", summary="Newest", content="Newest"),
        source="coach",
        actor="coach",
        embedding=Embedding(bag_of_words_embedding("Newest"), "bag-of-words"),
    )

    back = memory_undo_delete(user=user, token=token)

    # Back, and kept: the oldest of the coach's notes, it would otherwise go at once.
    assert back.pk == oldest.pk and back.is_protected and back.summary == "note number 0"
    assert sorted(m.summary for m in Memory.objects.filter(user=user)) == ["Newest", "note number 0"]
    assert MemoryEvent.objects.get(user=user, action="evicted").memory_id == middle.pk


# The page -------------------------------------------------------------------------------


def test_delete_then_undo_on_the_page_restores_the_row_and_the_counts(client: Client, user: User) -> None:
    memory = make_memory(user, "breakfast", source="user", summary="Oats every morning")
    make_memory(user, "rain", summary="Runs in the rain")

    deleted = client.post(f"/memories/{memory.pk}/delete", headers=HTMX).content.decode()

    assert counts(deleted) == "1 memory 0 kept for good 0 emails sent"
    assert '<ul class="stats" id="memory-counts" aria-label="At a glance" hx-swap-oob="true">' in deleted
    assert re.search(r'<span class="count" id="tier-episodic-count" hx-swap-oob="true">1</span>', deleted)

    undone = client.post("/memories/undo-delete", {"token": token_in(deleted), "memory_id": memory.pk}, headers=HTMX)

    page = undone.content.decode()
    assert undone.status_code == 200
    assert page.lstrip().startswith(f'<article class="memory is-kept just-saved" id="memory-{memory.pk}"')
    assert "Oats every morning" in page and "Written by you" in page
    assert counts(page) == "2 memories 1 kept for good 0 emails sent"
    assert re.search(r'<span class="count" id="tier-episodic-count" hx-swap-oob="true">2</span>', page)
    history = client.get(f"/memories/{memory.pk}/history", headers=HTMX).content.decode()
    assert "You restored it" in history and "You undid deleting it" in history


def test_an_undo_without_javascript_goes_back_to_the_memory_on_the_page(client: Client, user: User) -> None:
    memory = make_memory(user, "breakfast", summary="Oats every morning")
    page = client.post(f"/memories/{memory.pk}/delete").content.decode()

    response = client.post("/memories/undo-delete", {"token": token_in(page)}, follow=True)

    assert response.redirect_chain == [(f"/memories/#memory-{memory.pk}", 302)]
    assert "Undone: it is back, as it was." in response.content.decode()
    assert Memory.objects.get(pk=memory.pk).summary == "Oats every morning"


def test_another_persons_undo_on_the_page_says_so_in_place(user: User, other_user: User) -> None:
    memory = make_memory(user, "breakfast", summary="Oats every morning")
    owner = Client()
    owner.force_login(user)
    token = token_in(owner.post(f"/memories/{memory.pk}/delete", headers=HTMX).content.decode())
    stranger = Client()
    stranger.force_login(other_user)

    response = stranger.post("/memories/undo-delete", {"token": token, "memory_id": memory.pk}, headers=HTMX)

    page = response.content.decode()
    assert response.status_code == 409
    assert 'role="alert">This undo belongs to another account, so nothing was restored.' in page
    assert "Oats every morning" not in page and "Undo</button>" not in page
    assert not Memory.objects.filter(pk=memory.pk).exists()


def test_a_tampered_undo_on_the_page_is_a_message_without_javascript_too(client: Client, user: User) -> None:
    memory = make_memory(user, "breakfast", summary="Oats every morning")
    token = token_in(client.post(f"/memories/{memory.pk}/delete").content.decode())

    response = client.post("/memories/undo-delete", {"token": token + "x"}, follow=True)

    assert response.redirect_chain == [("/memories/", 302)]
    assert "This undo is damaged, so nothing was restored." in response.content.decode()
    assert not Memory.objects.filter(user=user).exists()


def test_the_undo_is_a_post_for_the_logged_in_person_with_the_csrf_token(user: User) -> None:
    anonymous = Client().post("/memories/undo-delete", {"token": "x"})
    assert anonymous.status_code == 302 and anonymous.url.startswith("/accounts/login/")
    person = Client()
    person.force_login(user)
    assert person.get("/memories/undo-delete").status_code == 405
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    assert strict.post("/memories/undo-delete", {"token": "x"}, headers=HTMX).status_code == 403


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_nothing_of_a_deleted_memory_is_kept_on_the_server(client: Client, user: User, htmx: bool) -> None:
    memory = make_memory(user, "breakfast-secret", summary="Oats every morning", content="Oats with honey at six")
    client.get("/memories/")

    page = client.post(f"/memories/{memory.pk}/delete", headers=HTMX if htmx else {}).content.decode()

    token = token_in(page)
    middle = len(token) // 2
    pieces = (token[-40:], token[middle : middle + 40])
    # Every row of every table, its encrypted columns decrypted, and every session decoded.
    for model in apps.get_models():
        for row in model.objects.all():
            values = [getattr(row, field.attname) for field in model._meta.concrete_fields]
            if isinstance(row, LoginSession):
                values.append(str(row.get_decoded()))
            for value in values:
                text = str(value)
                for secret in ("Oats every morning", "Oats with honey", "breakfast-secret", *pieces):
                    assert secret not in text, f"{model.__name__}.{row.pk} holds {secret!r}"
    assert not Memory.objects.filter(user=user).exists()
    assert MemoryEvent.objects.filter(user=user, memory_id=memory.pk).count() == 1
