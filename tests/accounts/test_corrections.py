"""A correction replaces the old fact: after the person edits a memory's line, or confirms
a change the coach suggested, the coach's next prompt holds the new fact and not the old."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.test import Client

from accounts.models import User
from coach.services import session_start
from infra.llm import Embedding
from memory.drafts import MemoryDraft
from memory.models import Memory, MemoryProposal
from memory.services import memory_save
from offline_coach import ModelServer, bag_of_words_embedding
from tests.coach.test_turn import ask, stream
from tests.memory.factories import make_memory

HTMX = {"HX-Request": "true"}
NIGHTS = "They work night shifts."
# What a model sends when it takes a change for the same fact said again: the old details
# kept, the new words below them, and a reason written for itself.
COACH_CHANGE = {
    "key": "shifts",
    "summary": "Works day shifts now",
    "content": f"{NIGHTS}\nThey work day shifts now.",
    "tier": None,
    "category": None,
    "due_at": None,
    "status": None,
    "clear": None,
    "reason": "The user said this again in other words; merged into the existing memory instead of a duplicate.",
}


@pytest.fixture
def person(live_app: str, user: User, client: Client) -> Client:
    client.force_login(user)
    return client


@pytest.fixture
def shifts(user: User) -> Memory:
    return make_memory(
        user,
        "shifts",
        source="onboarding",
        category="schedule",
        tier="profile",
        summary="Works night shifts",
        content=NIGHTS,
    )


def next_prompt(live_app: str, client: Client, user: User, model_server: ModelServer) -> str:
    """The system prompt of a new conversation's first turn: what the coach reads of them."""
    model_server.queue_text("Noted.")
    stream(live_app, client, ask(session_start(user=user), "What should I plan for this week?"))
    return ModelServer.system_prompt(model_server.chat_requests()[-1])


def edit(client: Client, memory: Memory, summary: str, content: str, **extra: str) -> str:
    fields = {"summary": summary, "content": content, "tier": memory.tier, "category": memory.category}
    data = {**fields, "version": str(memory.version), **extra}
    return unescape(client.post(f"/memories/{memory.pk}/edit", data, headers=HTMX).content.decode())


def test_a_new_line_over_old_details_asks_and_dropping_them_leaves_only_the_new_fact(
    live_app: str, person: Client, user: User, shifts: Memory, model_server: ModelServer
) -> None:
    asked = edit(person, shifts, "Works day shifts, Monday to Thursday", NIGHTS)

    assert "the details below still say:" in asked and f'<blockquote class="typed">{NIGHTS}</blockquote>' in asked
    assert Memory.objects.get(pk=shifts.pk).summary == "Works night shifts"

    edit(person, shifts, "Works day shifts, Monday to Thursday", NIGHTS, old_details="drop")

    prompt = next_prompt(live_app, person, user, model_server)
    assert "Works day shifts, Monday to Thursday" in prompt
    assert "night" not in prompt


def test_the_question_over_old_details_offers_its_two_saves_alone_without_doubled_punctuation(
    client: Client, user: User, shifts: Memory
) -> None:
    client.force_login(user)

    asked = edit(client, shifts, "Works day shifts, Monday to Thursday", NIGHTS)

    saves = re.findall(r"<button type=\"submit\"[^>]*>([^<]*)</button>", asked)
    assert saves == ["Save, and drop the old details", "Save, and keep the details"]
    assert not re.search(r"[.!?]”[.!?]", asked)


def test_details_the_person_keeps_stay_with_the_new_line(client: Client, user: User, shifts: Memory) -> None:
    client.force_login(user)

    edit(client, shifts, "Works nights, Monday to Thursday", NIGHTS, old_details="keep")

    shifts.refresh_from_db()
    assert (shifts.summary, shifts.content) == ("Works nights, Monday to Thursday", NIGHTS)


def test_details_rewritten_with_the_line_are_saved_without_a_question(
    client: Client, user: User, shifts: Memory
) -> None:
    client.force_login(user)

    edit(client, shifts, "Works day shifts", "Day shifts since March, 7 to 3.")

    shifts.refresh_from_db()
    assert (shifts.summary, shifts.content) == ("Works day shifts", "Day shifts since March, 7 to 3.")


def test_a_confirmed_change_from_the_coach_replaces_the_old_fact_and_says_so_to_the_person(
    live_app: str, person: Client, user: User, shifts: Memory, model_server: ModelServer
) -> None:
    model_server.queue_tool_calls([("update_memory", COACH_CHANGE)], text="Day shifts it is.")
    stream(live_app, person, ask(session_start(user=user), "I work day shifts now"))
    proposal = MemoryProposal.objects.get(user=user, status="pending")

    card = unescape(person.get("/memories/").content.decode())
    card = card[card.index(f'id="proposal-{proposal.pk}"') :]
    card = card[: card.index("</article>")]
    assert "Your coach thinks this has changed, from what you said." in card
    assert "The user" not in card and "merged" not in card
    suggested = card[card.index("Suggested") :]
    assert "They work day shifts now." in suggested and "night" not in suggested

    person.post(f"/memories/proposals/{proposal.pk}/confirm", headers=HTMX)

    prompt = next_prompt(live_app, person, user, model_server)
    assert "Works day shifts now" in prompt and "They work day shifts now." in prompt
    assert "night" not in prompt


def test_a_memory_history_leaves_out_reasons_the_model_wrote_for_itself(client: Client, user: User) -> None:
    note = make_memory(user, "running", summary="Runs on Sundays")
    memory_save(
        user=user,
        draft=MemoryDraft(
            key="running", tier="episodic", category="habit", summary="Runs on Sundays, 10 km", content=""
        ),
        source="coach",
        actor="coach",
        reason=COACH_CHANGE["reason"],
        merged=True,
        embedding=Embedding(bag_of_words_embedding("Runs on Sundays, 10 km"), "bag-of-words"),
    )
    client.force_login(user)

    html = unescape(client.get(f"/memories/{note.pk}/").content.decode())

    assert "Your coach merged a similar note into it" in html
    assert "The user" not in html and "instead of a duplicate" not in html
