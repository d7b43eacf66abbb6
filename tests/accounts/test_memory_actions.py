"""What a person does on the memory page: edit inline, add, delete, confirm or reject the
coach's suggestions, restore what was forgotten, keep what would be forgotten next."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import User
from infra.llm import Embedding
from memory.context import assemble_memory_context
from memory.drafts import MemoryDraft
from memory.models import Memory, MemoryEvent, MemoryProposal
from memory.proposals import proposal_make
from memory.services import memory_delete, memory_edit_by_user, memory_save
from offline_coach import ModelServer, bag_of_words_embedding
from tests.memory.factories import make_memories, make_memory, memory_named

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


@pytest.fixture
def client(client: Client, user: User) -> Client:
    client.force_login(user)
    return client


def embedding_requests(server: ModelServer) -> int:
    return sum(1 for request in server.requests if request.path.endswith("/embeddings"))


def edit(client: Client, memory_id: int, **fields: str):
    data = {"summary": "", "content": "", "tier": "episodic", "category": "habit", "version": "", **fields}
    return client.post(f"/memories/{memory_id}/edit", data, headers=HTMX)


def add(client: Client, **fields: str):
    data = {"summary": "", "content": "", "tier": "profile", "category": "other", **fields}
    return client.post("/memories/add", data, headers=HTMX)


def input_value(html: str, name: str) -> str:
    match = re.search(rf'<input type="text" name="{name}" value="([^"]*)"', html)
    return match.group(1) if match else ""


def evict_oldest(user: User, settings) -> MemoryEvent:
    """Two notes under a ceiling of two, then the coach saves a third: the oldest goes."""
    settings.MEMORY_MAX_STORED = 2
    make_memories(user, 2)
    memory_save(
        user=user,
        draft=MemoryDraft(key="newest", tier="episodic", category="habit", summary="Newest", content="Newest"),
        source="coach",
        actor="coach",
        embedding=Embedding(bag_of_words_embedding("Newest"), "bag-of-words"),
    )
    return MemoryEvent.objects.get(user=user, action="evicted")


# Edit -----------------------------------------------------------------------------------


def test_the_edit_form_holds_the_memory_as_it_is(client: Client, user: User) -> None:
    memory = make_memory(user, "breakfast", summary="Oats", content="Oats every morning", category="habit")

    html = client.get(f"/memories/{memory.pk}/edit", headers=HTMX).content.decode()

    assert input_value(html, "summary") == "Oats"
    assert "Oats every morning</textarea>" in html
    assert '<option value="habit" selected>' in html
    assert 'name="version" value="1"' in html


def test_an_edit_shows_the_new_text_protects_it_and_records_it(
    client: Client, user: User, model_server: ModelServer
) -> None:
    memory = make_memory(user, "breakfast", summary="Oats every morning")
    before = embedding_requests(model_server)

    response = edit(client, memory.pk, summary="Eggs every morning", version="1")

    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith(f'<article class="memory is-kept just-saved" id="memory-{memory.pk}"')
    assert "Eggs every morning" in html and "Kept: you wrote it" in html and "You edited it" in html
    memory.refresh_from_db()
    # Now the person's own: renamed by its category and a number, never by its text.
    assert memory.source == "manual" and memory.summary == "Eggs every morning" and memory.key == "habit-1"
    assert not Memory.objects.keyed(user.pk, "breakfast").exists()
    assert embedding_requests(model_server) == before + 1
    event = MemoryEvent.objects.get(user=user, memory_id=memory.pk)
    assert (event.actor, event.action, event.key) == ("user", "updated", "habit-1")


def test_after_an_edit_the_coach_sees_the_new_text_and_not_the_old(client: Client, user: User) -> None:
    memory = make_memory(user, "breakfast", summary="Oats every morning")

    edit(client, memory.pk, summary="Eggs every morning")

    text = assemble_memory_context(user=user, now=timezone.now()).text
    assert "Eggs every morning" in text
    assert "Oats every morning" not in text


def test_an_edit_without_htmx_goes_back_to_the_memory_on_the_page(client: Client, user: User) -> None:
    memory = make_memory(user, "breakfast")

    response = client.post(
        f"/memories/{memory.pk}/edit", {"summary": "Eggs", "tier": "episodic", "category": "habit", "version": ""}
    )

    assert response.status_code == 302 and response.url == f"/memories/#memory-{memory.pk}"


def test_an_edit_page_without_htmx_is_a_whole_page(client: Client, user: User) -> None:
    memory = make_memory(user, "breakfast")

    html = client.get(f"/memories/{memory.pk}/edit").content.decode()

    assert "<html" in html and "Edit a memory" in html and f'id="memory-{memory.pk}"' in html


def test_an_intention_without_a_date_is_kept_for_the_next_conversation(
    client: Client, user: User, model_server: ModelServer
) -> None:
    response = add(client, summary="Come back to my pacing", tier="prospective", category="project")

    memory = Memory.objects.get(user=user)
    assert (memory.tier, memory.due_at, memory.status) == ("prospective", None, "open")
    assert "At your next conversation" in response.content.decode()


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"summary": "x" * 151}, "summary", "Keep this to 150 characters (it has 151)"),
        ({"summary": "   "}, "summary", "Write what your coach should remember."),
        ({"summary": "Fine", "content": "y" * 2001}, "content", "Keep the details to 2000 characters; they have 2001."),
        ({"summary": "Fine", "category": "cooking"}, "category", "“cooking” is not a category"),
        ({"summary": "Fine", "tier": "forever"}, "tier", "Choose about you, from your conversations, or coming up."),
        ({"summary": "Fine", "tier": "prospective", "due_date": "soon"}, "due_date", "Give a date"),
    ],
)
def test_an_invalid_edit_says_what_is_wrong_inline_and_keeps_what_was_typed(
    client: Client, user: User, model_server: ModelServer, fields: dict[str, str], field: str, message: str
) -> None:
    memory = make_memory(user, "breakfast", summary="Oats")
    before = embedding_requests(model_server)

    response = edit(client, memory.pk, **fields)

    html = response.content.decode()
    assert response.status_code == 200
    assert 'class="memory editing"' in html
    error = re.search(rf'<ul class="errorlist" id="edit-{memory.pk}-{field}_error">(.*?)</ul>', html, re.S)
    assert error and message in error.group(1)
    if "summary" in fields and fields["summary"].strip():
        assert input_value(html, "summary") == fields["summary"]
    if "content" in fields:
        assert fields["content"] + "</textarea>" in html
    assert Memory.objects.get(pk=memory.pk).summary == "Oats"
    assert embedding_requests(model_server) == before


def test_editing_a_memory_deleted_meanwhile_says_so_and_keeps_what_was_typed(client: Client, user: User) -> None:
    memory = make_memory(user, "breakfast", summary="Oats")
    client.get(f"/memories/{memory.pk}/edit", headers=HTMX)
    memory_delete(user=user, memory_id=memory.pk, actor="user")

    response = edit(client, memory.pk, summary="Eggs every morning", content="Since March")

    html = response.content.decode()
    assert response.status_code == 200
    assert "This memory is gone:" in html and "deleted or forgotten while you were editing it" in html
    assert "Eggs every morning" in html and "Since March" in html
    assert 'action="/memories/add"' in html and "Save it as a new memory" in html


def test_editing_a_memory_forgotten_meanwhile_says_so(client: Client, user: User, settings) -> None:
    event = evict_oldest(user, settings)

    response = edit(client, event.memory_id, summary="Changed my mind")

    assert response.status_code == 200
    assert "This memory is gone:" in response.content.decode()


def test_an_edit_of_a_memory_changed_meanwhile_keeps_the_typing_and_a_second_save_wins(
    client: Client, user: User
) -> None:
    memory = make_memory(user, "breakfast", summary="Oats")
    memory_edit_by_user(user=user, memory_id=memory.pk, draft=replace(MemoryDraft.of(memory), summary="Porridge"))

    first = edit(client, memory.pk, summary="Eggs", version="1").content.decode()

    assert "This memory changed while you were editing it" in first
    assert "Saved now: “Porridge”" in first
    assert input_value(first, "summary") == "Eggs"
    assert 'name="version" value="2"' in first
    second = edit(client, memory.pk, summary="Eggs", version="2")
    assert "Eggs" in second.content.decode()
    assert Memory.objects.get(pk=memory.pk).summary == "Eggs"


def test_cancelling_an_edit_gives_the_row_back(client: Client, user: User) -> None:
    memory = make_memory(user, "breakfast", summary="Oats")

    html = client.get(f"/memories/{memory.pk}/", headers=HTMX).content.decode()

    assert html.lstrip().startswith(f'<article class="memory" id="memory-{memory.pk}"')


# Add ------------------------------------------------------------------------------------


def test_always_remember_this_saves_a_protected_memory_of_the_users_own(client: Client, user: User) -> None:
    response = add(client, summary="I am vegetarian", tier="profile", category="preference")

    html = response.content.decode()
    assert "Saved. Your coach will always remember this." in html
    assert input_value(html, "summary") == ""
    assert '<div hx-swap-oob="afterbegin:#tier-profile-list">' in html
    assert "I am vegetarian" in html and "Kept: you wrote it" in html
    memory = Memory.objects.get(user=user)
    assert (memory.source, memory.tier, memory.category) == ("user", "profile", "preference")
    assert memory.key == "preference-1"


def counts_swapped_in(html: str) -> str:
    """The counts at the top, as an htmx response swaps them in out of band."""
    found = re.search(r'<ul class="stats" id="memory-counts"[^>]*hx-swap-oob="true">(.*?)</ul>', html, re.S)
    assert found, "the counts are not updated"
    return " ".join(re.sub(r"<[^>]+>", " ", found.group(1)).split())


def test_an_addition_updates_the_counts_at_the_top_in_place(client: Client, user: User) -> None:
    make_memories(user, 2)

    html = add(client, summary="I am vegetarian", tier="profile", category="preference").content.decode()

    assert counts_swapped_in(html) == "3 memories 1 kept for good 0 emails sent"
    assert '<span class="count" id="tier-profile-count" hx-swap-oob="true">1</span>' in html
    assert (
        '<section class="card" id="next-to-forget" aria-labelledby="next-to-forget-title" hx-swap-oob="true">' in html
    )


def test_always_remember_this_can_plan_something_for_later(client: Client, user: User) -> None:
    day = (timezone.now() + timedelta(days=60)).date()

    add(client, summary="Half marathon", tier="prospective", category="goal", due_date=day.isoformat())

    memory = Memory.objects.get(user=user)
    assert memory.tier == "prospective" and memory.status == "open"
    assert memory.due_at.date() == day


def test_without_htmx_an_added_memory_is_shown_on_the_page(client: Client, user: User) -> None:
    response = client.post("/memories/add", {"summary": "I am vegetarian", "tier": "profile", "category": "other"})

    memory = Memory.objects.get(user=user)
    assert response.status_code == 302 and response.url == f"/memories/#memory-{memory.pk}"


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"summary": "x" * 200}, "summary", "it has 200"),
        ({"summary": ""}, "summary", "Write what your coach should remember."),
        ({"summary": "Fine", "category": "cooking"}, "category", "is not a category"),
        ({"summary": "Fine", "tier": "prospective", "due_date": "2001-01-01"}, "due_date", "The date is in the past"),
    ],
)
def test_an_invalid_addition_says_what_is_wrong_inline(
    client: Client, user: User, fields: dict[str, str], field: str, message: str
) -> None:
    response = add(client, **fields)

    html = response.content.decode()
    assert response.status_code == 200 and html.lstrip().startswith("<form")
    error = re.search(rf'<ul class="errorlist" id="add-{field}_error">(.*?)</ul>', html, re.S)
    assert error and message in error.group(1)
    assert not Memory.objects.filter(user=user).exists()


def test_an_invalid_addition_without_htmx_shows_the_page_with_the_form_open(client: Client) -> None:
    html = client.post("/memories/add", {"summary": "", "tier": "profile", "category": "other"}).content.decode()

    assert "<html" in html and '<details class="card add-card" id="add" open>' in html


# Delete ---------------------------------------------------------------------------------


def test_deleting_asks_first_and_says_it_can_be_undone_for_a_while(client: Client, user: User) -> None:
    memory = make_memory(user, "breakfast", summary="Oats")

    html = client.get(f"/memories/{memory.pk}/delete", headers=HTMX).content.decode()

    assert "Delete this memory?" in html and "Oats" in html
    assert "You can undo this for 10 minutes" in html
    assert Memory.objects.filter(pk=memory.pk).exists()


def test_deleting_removes_the_memory_its_embedding_and_its_text_in_the_history(client: Client, user: User) -> None:
    memory = make_memory(user, "breakfast", summary="Oats")
    memory_edit_by_user(user=user, memory_id=memory.pk, draft=replace(MemoryDraft.of(memory), summary="Eggs"))

    response = client.post(f"/memories/{memory.pk}/delete", headers=HTMX)

    # In the row's place: "Deleted · Undo", the undo held by the page alone.
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith(f'<article class="memory deleted" id="memory-{memory.pk}"')
    assert "<strong>Deleted</strong>: “Eggs”" in html and ">Undo</button>" in html
    assert not Memory.objects.filter(pk=memory.pk).exists()
    assert not Memory.objects.filter(user=user, embedding__isnull=False).exists()
    events = list(MemoryEvent.objects.filter(user=user, memory_id=memory.pk))
    assert [e.action for e in events] == ["updated", "deleted"]
    assert all(e.before is None and e.after is None and e.key is None and e.reason == "" for e in events)
    history = client.get(f"/memories/{memory.pk}/history", headers=HTMX).content.decode()
    assert "Text erased at your request." in history and "Oats" not in history and "Eggs" not in history


def test_deleting_twice_is_done_all_the_same(client: Client, user: User) -> None:
    memory = make_memory(user, "breakfast")
    client.post(f"/memories/{memory.pk}/delete", headers=HTMX)

    again = client.post(f"/memories/{memory.pk}/delete", headers=HTMX)

    # Nothing is left to undo from: the second answer says deleted, with no Undo.
    assert again.status_code == 200
    assert "<strong>Deleted</strong>" in again.content.decode() and "Undo" not in again.content.decode()


def test_deleting_without_htmx_shows_the_page_with_the_undo_at_the_top(client: Client, user: User) -> None:
    memory = make_memory(user, "breakfast", summary="Oats every morning")
    make_memory(user, "rain", summary="Runs in the rain")

    response = client.post(f"/memories/{memory.pk}/delete")

    # Not a redirect: the undo would have to wait in the session, on the server.
    html = response.content.decode()
    assert response.status_code == 200 and "<html" in html
    notice = re.search(r'<section class="card deleted-notice".*?</section>', html, re.S).group(0)
    assert "Deleted</strong>: “Oats every morning”" in notice
    assert 'action="/memories/undo-delete"' in notice and 'name="token"' in notice
    assert "Runs in the rain" in html
    assert re.search(r'id="memory-counts"[^>]*>\s*<li><strong>1</strong> memory</li>', html)


# Proposals ------------------------------------------------------------------------------


def propose(user: User, memory: Memory, *, summary: str | None = None) -> MemoryProposal:
    draft = replace(MemoryDraft.of(memory), summary=summary) if summary else None
    return proposal_make(user=user, memory=memory, kind="update" if summary else "delete", draft=draft, reason="why")


def test_confirming_applies_exactly_what_was_shown(client: Client, user: User) -> None:
    memory = make_memory(user, "peanuts", source="user", category="allergy", summary="Allergic to peanuts")
    proposal = propose(user, memory, summary="Allergic to all nuts")

    response = client.post(f"/memories/proposals/{proposal.pk}/confirm", headers=HTMX)

    html = response.content.decode()
    assert f'id="memory-{memory.pk}" hx-swap-oob="true"' in html and "Allergic to all nuts" in html
    memory.refresh_from_db()
    assert memory.summary == "Allergic to all nuts" and memory.source == "manual" and memory.key == "allergy-1"


def test_confirming_a_change_to_a_memory_edited_since_fails_with_a_message(client: Client, user: User) -> None:
    memory = make_memory(user, "peanuts", source="user", category="allergy", summary="Allergic to peanuts")
    proposal = propose(user, memory, summary="Allergic to all nuts")
    memory_edit_by_user(
        user=user, memory_id=memory.pk, draft=replace(MemoryDraft.of(memory), summary="Peanuts and sesame")
    )

    html = client.post(f"/memories/proposals/{proposal.pk}/confirm", headers=HTMX).content.decode()

    assert "the suggestion no longer applies" in html
    assert Memory.objects.get(pk=memory.pk).summary == "Peanuts and sesame"


def test_confirming_a_deletion_removes_the_memory_from_the_page(client: Client, user: User) -> None:
    memory = make_memory(user, "peanuts", source="user", category="allergy")
    proposal = propose(user, memory)

    html = client.post(f"/memories/proposals/{proposal.pk}/confirm", headers=HTMX).content.decode()

    assert f'<article id="memory-{memory.pk}" hx-swap-oob="delete"></article>' in html
    assert not Memory.objects.filter(pk=memory.pk).exists()


def test_rejecting_leaves_the_memory_as_it_is(client: Client, user: User) -> None:
    memory = make_memory(user, "peanuts", source="user", category="allergy", summary="Allergic to peanuts")
    proposal = propose(user, memory, summary="No allergies")

    response = client.post(f"/memories/proposals/{proposal.pk}/reject", headers=HTMX)

    assert response.content == b""
    assert Memory.objects.get(pk=memory.pk).summary == "Allergic to peanuts"
    assert MemoryProposal.objects.get(pk=proposal.pk).status == "rejected"


def test_a_decided_proposal_cannot_be_confirmed(client: Client, user: User) -> None:
    memory = make_memory(user, "peanuts", source="user", category="allergy", summary="Allergic to peanuts")
    proposal = propose(user, memory, summary="No allergies")
    client.post(f"/memories/proposals/{proposal.pk}/reject", headers=HTMX)

    response = client.post(f"/memories/proposals/{proposal.pk}/confirm", headers=HTMX)

    # Answered already (another tab, a double click): a conflict that says so, nothing changed.
    assert response.status_code == 409
    assert "This suggestion was answered already" in response.content.decode()
    assert Memory.objects.get(pk=memory.pk).summary == "Allergic to peanuts"
    assert MemoryProposal.objects.get(pk=proposal.pk).status == "rejected"


# Restore and keep -----------------------------------------------------------------------


def test_a_restored_memory_is_protected_and_back_in_the_context(client: Client, user: User, settings) -> None:
    event = evict_oldest(user, settings)

    response = client.post(f"/memories/forgotten/{event.pk}/restore", headers=HTMX)

    html = response.content.decode()
    assert '<div hx-swap-oob="afterbegin:#tier-episodic-list">' in html and "note number 0" in html
    memory = Memory.objects.get(user=user, pk=event.memory_id)
    # Back under its old id, as the person's own: renamed by its category and a number.
    assert memory.source == "manual" and memory.is_protected and memory.key == "habit-1"
    assert "note number 0" in assemble_memory_context(user=user, now=timezone.now()).text
    assert "note number 0" not in client.get("/memories/").content.decode().split('id="forgotten"', 1)[1]
    # Under a ceiling of two, the restored memory made the coach forget another.
    assert counts_swapped_in(html) == "2 memories 1 kept for good 0 emails sent"


def test_restoring_a_key_that_exists_again_says_why_not(client: Client, user: User, settings) -> None:
    event = evict_oldest(user, settings)
    settings.MEMORY_MAX_STORED = 60
    # Saved again after the eviction, as another memory (another id): the forgotten one is
    # still listed, and restoring it is refused with the reason, next to it.
    make_memory(user, "note-0", summary="A new note-0")

    response = client.post(f"/memories/forgotten/{event.pk}/restore", headers=HTMX)

    html = response.content.decode()
    assert response.status_code == 200 and html.lstrip().startswith(f'<li class="forgotten" id="forgotten-{event.pk}"')
    assert 'role="alert"' in html and "again; edit that one instead of restoring this." in html
    assert memory_named(user, "note-0").summary == "A new note-0"
    assert not Memory.objects.filter(pk=event.memory_id).exists()


def test_keeping_protects_a_memory_next_to_be_forgotten(client: Client, user: User) -> None:
    oldest = make_memories(user, 3)[0]

    response = client.post(f"/memories/{oldest.pk}/keep", headers=HTMX)

    html = response.content.decode()
    assert html.lstrip().startswith('<section class="card" id="next-to-forget"')
    assert f'action="/memories/{oldest.pk}/keep"' not in html
    assert f'id="memory-{oldest.pk}" hx-swap-oob="true"' in html and "Kept: you wrote it" in html
    assert counts_swapped_in(html) == "3 memories 1 kept for good 0 emails sent"
    oldest.refresh_from_db()
    assert oldest.source == "manual" and oldest.key == "habit-1"


# History and what the coach sees ---------------------------------------------------------


def test_the_history_tells_each_change_in_words(client: Client, user: User) -> None:
    memory = make_memory(user, "breakfast", summary="Oats")
    memory_edit_by_user(user=user, memory_id=memory.pk, draft=replace(MemoryDraft.of(memory), summary="Eggs"))

    html = client.get(f"/memories/{memory.pk}/history", headers=HTMX).content.decode()

    assert "You changed it" in html
    assert re.search(r"Was</span> Oats.*Became</span> Eggs", html, re.S)


def test_the_history_page_of_a_forgotten_memory_still_opens(client: Client, user: User, settings) -> None:
    event = evict_oldest(user, settings)

    html = client.get(f"/memories/{event.memory_id}/").content.decode()

    assert "A memory no longer kept" in html and "Forgotten to make room" in html


def test_what_the_coach_sees_shows_the_text_and_what_was_left_out(client: Client, user: User, settings) -> None:
    settings.MEMORY_CONTEXT_BUDGET_TOKENS = 300
    make_memory(user, "shoulder", source="user", category="injury", summary="Bad left shoulder")
    make_memories(user, 30)

    html = client.get("/memories/context", headers=HTMX).content.decode()

    readable, sent = html.split('<pre class="context-text"', 1)
    assert "Bad left shoulder" in sent and "MEMORIES" in sent
    assert re.search(
        r'<li class="context-entry form-left-out"[^>]*>\s*<p class="context-summary">note number \d+</p>.*?'
        r"Left out for lack of room",
        readable,
        re.S,
    )
    assert "left out for lack of room" in readable


def test_without_htmx_an_edit_of_a_memory_gone_meanwhile_is_a_page_that_keeps_the_text(
    client: Client, user: User
) -> None:
    memory = make_memory(user, "breakfast")
    memory_delete(user=user, memory_id=memory.pk, actor="user")

    response = client.post(f"/memories/{memory.pk}/edit", {"summary": "Eggs", "tier": "episodic", "category": "habit"})

    html = response.content.decode()
    assert response.status_code == 200 and "<html" in html
    assert "This memory is gone" in html and 'value="Eggs"' in html
