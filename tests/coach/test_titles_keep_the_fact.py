"""Titles that keep the fact: the one line a memory is known by on the memory page, under a
reply and in what is next to be forgotten names the fact itself, as the tools' description
asks, and never a key. Checked on the demo coach's own saves, statement by statement, and
on a scripted model's saves through the app."""

from __future__ import annotations

import html
import json
import re
from datetime import date

import pytest
from django.test import Client

from accounts.models import User
from coach.services import message_post, session_start
from coach.turn import turn_start
from memory.models import Memory
from memory.tool_schemas import tool_definitions
from memory.tools import ToolContext, run_tool
from offline_coach import ModelServer
from offline_coach.statements import notes_in
from tests.coach.demo_people import PEOPLE

TODAY = date(2026, 12, 3)
# What the people of the demo's walk and the climber say of themselves, and
# statements whose second half points back to the first.
STATEMENTS = (
    *(fact for person in PEOPLE for fact in person.facts),
    "I tweaked my finger on a crimp: the physio says it's an A2 pulley strain, so no max hangs for six weeks.",
    "I work at the pharmacy and I need to be there by 7am on weekdays.",
    "I'm going to Kalymnos in May and I want to send a 7b before then.",
    "I have a talk in June.",
    "I want to run a sub-3 marathon next year.",
)
MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
# What makes a fact this fact: a number, a name, a month or a day, a side, a part of the body.
NAMING = re.compile(
    rf"\b(?:\w*\d\w*|[A-Z][a-z]+(?: [A-Z][a-z]+)*|{MONTHS}|(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)days?"
    r"|left|right|wrist|hip|finger|knee|shoulder|back|ankle)\b"
)
# A line that leans on what was said before it: "be there by 7am", "before then".
LEANS_ON = re.compile(r"\b(?:there|then)\b", re.IGNORECASE)
TURN_SECONDS = 30


def naming_words(statement: str) -> set[str]:
    words = set(NAMING.findall(statement))
    # The first word of a sentence, and "I", are capitals of the sentence, not names.
    return words - {statement.split()[0].strip(".,:"), "I", "Actually"}


@pytest.mark.parametrize("statement", STATEMENTS)
def test_every_line_the_demo_saves_names_its_fact_said_to_the_person(statement: str) -> None:
    notes = notes_in(statement, today=TODAY)

    assert notes, f"the demo keeps nothing of {statement!r}"
    said = " ".join(note.summary for note in notes)
    assert naming_words(statement) <= set(NAMING.findall(said)), (statement, [n.summary for n in notes])
    for note in notes:
        assert note.summary.startswith(("You", "Your")), note.summary
        assert note.summary != note.key and ("-" not in note.key or note.key not in note.summary)
        if LEANS_ON.search(note.summary):
            # Said with what it leans on: the place or the time it points back to.
            assert re.search(r"pharmacy|Kalymnos", note.summary), note.summary


def test_the_tools_ask_for_a_line_that_names_the_fact_and_never_a_key() -> None:
    [save] = [tool for tool in tool_definitions() if tool["function"]["name"] == "save_memory"]

    described = save["function"]["parameters"]["properties"]["summary"]["description"]

    assert "names the fact itself" in described and "nor a key" in described


@pytest.mark.django_db
@pytest.mark.parametrize("summary", ["trip-may", "Trip-May", "trip-may: Kalymnos in May"])
def test_a_save_whose_line_is_a_key_is_refused_so_the_model_says_the_fact(user: User, summary: str) -> None:
    arguments = {"key": "trip-may", "tier": "prospective", "category": "project", "summary": summary}
    result = json.loads(
        run_tool(
            ToolContext(user=user),
            "save_memory",
            json.dumps({**arguments, "content": "", "due_at": None, "keep_separate": None}),
        )
    )

    assert result["status"] == "error" and "they never see keys" in result["error"], result
    assert not Memory.objects.filter(user=user).exists()


@pytest.mark.django_db(transaction=True)
def test_a_scripted_models_save_shows_its_line_and_never_its_key_wherever_the_person_looks(
    user: User, model_server: ModelServer, settings
) -> None:
    settings.MEMORY_MAX_STORED = 1
    summary = "You're going on a climbing trip to Kalymnos in May"
    save = {"key": "trip-may", "tier": "prospective", "category": "project", "summary": summary}
    model_server.queue_tool_calls(
        [("save_memory", {**save, "content": f"{summary}.", "due_at": None, "keep_separate": None})]
    )
    model_server.queue_text("Noted: Kalymnos in May.")
    session = session_start(user=user)
    message = message_post(session=session, text="I'm going on a climbing trip to Kalymnos in May.", client_id=None)
    turn_start(user_id=user.pk, message_id=message.pk).result(timeout=TURN_SECONDS)
    client = Client()
    client.force_login(user)

    chat = html.unescape(client.get(f"/chat/{session.pk}/").content.decode())
    memories = html.unescape(client.get("/memories/").content.decode())

    assert f"Saved to memory: {summary}" in chat
    next_to_forget = memories[memories.index('id="next-to-forget"') :]
    assert summary in next_to_forget.split("</section>")[0]
    for page in (chat, memories):
        assert "trip-may" not in page
