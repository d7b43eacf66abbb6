"""Corrections the person makes, as the offline coach's memory tool calls, and its reply
once the app has answered them. Over real HTTP with the openai SDK, as the app drives it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from offline_coach import ModelServer

TODAY = "Today: 2025-03-10 (Monday)"
TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}
    for name in ("save_memory", "update_memory", "delete_memory")
]
TALK = {"key": "talk-june", "tier": "prospective", "summary": "Giving a talk in June", "due_at": "2025-06-01"}
SHIFTS = {"key": "schedule", "tier": "profile", "summary": "Works night shifts"}
EVENINGS = {"key": "schedule-evenings", "tier": "profile", "summary": "Trains in the evenings"}
GOAL = {"key": "goal-run-marathon", "tier": "profile", "summary": "Goal: run a marathon"}
PEANUTS = {"key": "allergy-1", "tier": "profile", "source": "the person", "summary": "Allergic to peanuts"}


@pytest.fixture(scope="module")
def running_server() -> Iterator[ModelServer]:
    with ModelServer(scripted=True) as server:
        yield server


@pytest.fixture
def client(running_server: ModelServer) -> openai.OpenAI:
    running_server.reset()
    return openai.OpenAI(base_url=running_server.base_url, api_key="offline", max_retries=0, timeout=5)


def system(**topics: list[dict[str, Any]]) -> dict[str, str]:
    lines = ["# Coach", TODAY, "<<MEMORIES n>>"]
    for topic, memories in topics.items():
        lines += [f"# {topic}", *(json.dumps(memory) for memory in memories)]
    return {"role": "system", "content": "\n".join([*lines, "<<END MEMORIES n>>"])}


def calls(client: openai.OpenAI, text: str, **topics: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    completion = client.chat.completions.create(
        model="offline-coach", messages=[system(**topics), {"role": "user", "content": text}], tools=TOOLS
    )
    made = completion.choices[0].message.tool_calls or []
    return [(call.function.name, json.loads(call.function.arguments)) for call in made]


def test_a_new_month_updates_the_intention_it_names_and_saves_nothing_new(client: openai.OpenAI) -> None:
    [(name, arguments)] = calls(client, "Actually, my talk is in July now, not June.", project=[TALK, GOAL])

    assert (name, arguments["key"]) == ("update_memory", "talk-june")
    assert (arguments["summary"], arguments["due_at"]) == ("Giving a talk in July", "2025-07-01")
    # Shown to the person with the change: their own words, not a note to a model.
    assert arguments["reason"] == "You told me: \u201cActually, my talk is in July now, not June.\u201d"


def test_what_they_no_longer_do_is_deleted(client: openai.OpenAI) -> None:
    made = calls(client, "I don't work night shifts any more.", schedule=[SHIFTS], project=[TALK])

    assert [(name, arguments["key"]) for name, arguments in made] == [("delete_memory", "schedule")]


def test_now_i_updates_the_habit_it_replaces(client: openai.OpenAI) -> None:
    [(name, arguments)] = calls(client, "Now I train at lunchtime.", schedule=[EVENINGS], project=[TALK])

    assert (name, arguments["key"]) == ("update_memory", "schedule-evenings")
    assert arguments["summary"] == "Trains at lunchtime"


def test_i_changed_my_goal_names_the_new_goal(client: openai.OpenAI) -> None:
    [(name, arguments)] = calls(client, "I changed my goal to a 10k.", goal=[GOAL], allergy=[PEANUTS])

    assert (name, arguments["key"], arguments["summary"]) == ("update_memory", "goal-run-marathon", "Goal: a 10k")


def test_a_protected_note_is_corrected_by_the_same_call_which_the_app_makes_a_suggestion(
    client: openai.OpenAI,
) -> None:
    made = calls(client, "I'm not allergic to peanuts any more.", allergy=[PEANUTS], project=[TALK])

    assert [(name, arguments["key"]) for name, arguments in made] == [("delete_memory", "allergy-1")]


PACING = {"key": "goal-better-pacing", "tier": "profile", "summary": "Goal: better pacing on long runs"}
RACE = {"key": "half-marathon-april", "tier": "prospective", "summary": "Training for a half marathon in April"}


@pytest.mark.parametrize(
    "text",
    [
        "Is my talk still in June?",
        "Actually, I'd love some help with my pacing on long runs.",
        "I'm now training three times a week for the half marathon.",
        "I no longer drink coffee.",
    ],
)
def test_questions_and_what_changes_no_memory_correct_nothing(client: openai.OpenAI, text: str) -> None:
    made = calls(client, text, project=[TALK, RACE], schedule=[SHIFTS], goal=[PACING])

    assert {name for name, _ in made} <= {"save_memory"}


def answer_after(client: openai.OpenAI, name: str, arguments: dict[str, Any], result: dict[str, Any]) -> str:
    call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    messages = [
        system(project=[TALK], allergy=[PEANUTS]),
        {"role": "user", "content": "Correcting you"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps(result)},
    ]
    completion = client.chat.completions.create(model="offline-coach", messages=messages, tools=TOOLS)
    return completion.choices[0].message.content or ""


def test_after_an_update_the_reply_says_the_new_fact_and_not_the_old(client: openai.OpenAI) -> None:
    update = {"key": "talk-june", "summary": "Giving a talk in July", "reason": "You told me: \u201c...\u201d"}

    reply = answer_after(client, "update_memory", update, {"status": "updated", "key": "talk-june"})

    assert reply.startswith("Got it, thanks for putting me right: you're giving a talk in July now.")
    assert "June" not in reply


def test_after_a_suggestion_the_reply_says_it_waits_for_the_person_to_confirm(client: openai.OpenAI) -> None:
    delete = {"key": "allergy-1", "reason": "You told me: \u201cI'm not allergic to peanuts any more.\u201d"}

    reply = answer_after(client, "delete_memory", delete, {"status": "proposed", "key": "allergy-1"})

    assert "confirm it on your memory page" in reply
    assert "leave that behind" not in reply
