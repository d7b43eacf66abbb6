"""Corrections the person makes, found as a model finds them: the offline coach searches the
memories for each sentence (`search_memories`), and a sentence that says a found memory
changed becomes an update or a delete on it; then its reply, once the app has answered.
Over real HTTP with the openai SDK, as the app drives it."""

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
    for name in ("save_memory", "update_memory", "delete_memory", "search_memories")
]
TALK = {"key": "talk-june", "tier": "prospective", "category": "project", "summary": "Giving a talk in June"}
SHIFTS = {"key": "schedule", "tier": "profile", "category": "schedule", "summary": "Works night shifts"}
EVENINGS = {"key": "schedule-evenings", "tier": "profile", "category": "schedule", "summary": "Trains in the evenings"}
GOAL = {"key": "goal-run-marathon", "tier": "profile", "category": "goal", "summary": "Goal: run a marathon"}
PEANUTS = {"key": "allergy-1", "tier": "profile", "category": "allergy", "summary": "Allergic to peanuts"}
PACING = {
    "key": "goal-better-pacing",
    "tier": "profile",
    "category": "goal",
    "summary": "Goal: better pacing on long runs",
}
RACE = {
    "key": "half-marathon-april",
    "tier": "prospective",
    "category": "project",
    "summary": "Training for a half marathon in April",
}
BAKER = {
    "key": "schedule",
    "tier": "profile",
    "category": "schedule",
    "summary": "Starts work at 4am",
    "content": "They're a baker, so they start work at 4am.",
}
CONTEST = {"key": "goal-short-story-contest", "category": "goal", "summary": "Goal: enter the short story contest"}
NOVEL = {"key": "goal-finish-novel", "category": "goal", "summary": "Goal: finish the first draft of the novel"}
SYSTEM = {"role": "system", "content": f"# Coach\n{TODAY}"}


@pytest.fixture(scope="module")
def running_server() -> Iterator[ModelServer]:
    with ModelServer(scripted=True) as server:
        yield server


@pytest.fixture
def client(running_server: ModelServer) -> openai.OpenAI:
    running_server.reset()
    return openai.OpenAI(base_url=running_server.base_url, api_key="offline", max_retries=0, timeout=5)


def ask(client: openai.OpenAI, messages: list[dict[str, Any]]) -> Any:
    completion = client.chat.completions.create(model="offline-coach", messages=messages, tools=TOOLS)
    return completion.choices[0].message


def searched(client: openai.OpenAI, text: str, *found: dict[str, Any]) -> list[dict[str, Any]]:
    """The conversation once the coach has searched for each sentence of `text` and the app
    has found `found` (best first) for every one of them."""
    message = ask(client, [SYSTEM, {"role": "user", "content": text}])
    assert {call.function.name for call in message.tool_calls} == {"search_memories"}
    # The search gives keys and summaries; the notes themselves are in the prompt, as the app sends them.
    result = json.dumps(
        {"status": "found", "memories": [{k: v for k, v in m.items() if k != "content"} for m in found]}
    )
    system = {"role": "system", "content": "\n".join([SYSTEM["content"], *(json.dumps(m) for m in found)])}
    calls = [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": "search_memories", "arguments": call.function.arguments},
        }
        for call in message.tool_calls
    ]
    return [
        system,
        {"role": "user", "content": text},
        {"role": "assistant", "content": None, "tool_calls": calls},
        *({"role": "tool", "tool_call_id": call["id"], "content": result} for call in calls),
    ]


def calls(client: openai.OpenAI, text: str, *found: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The writes the coach makes once its searches found `found`."""
    made = ask(client, searched(client, text, *found)).tool_calls or []
    return [(call.function.name, json.loads(call.function.arguments)) for call in made]


def test_each_sentence_is_searched_before_anything_is_written(client: openai.OpenAI) -> None:
    message = ask(client, [SYSTEM, {"role": "user", "content": "My talk moved to July. Also, I'm allergic to kiwi."}])

    queries = [json.loads(call.function.arguments)["query"] for call in message.tool_calls]
    assert queries == ["My talk moved to July.", "Also, I'm allergic to kiwi."]


def test_a_new_month_swaps_into_the_intention_the_search_found(client: openai.OpenAI) -> None:
    [(name, arguments)] = calls(client, "Actually, my talk is in July now, not June.", TALK, GOAL)

    assert (name, arguments["key"]) == ("update_memory", "talk-june")
    assert (arguments["summary"], arguments["due_at"]) == ("Giving a talk in July", "2025-07-01")
    # Shown to the person with the change: their own words, not a note to a model.
    assert arguments["reason"] == "You told me: \u201cActually, my talk is in July now, not June.\u201d"


def test_what_they_no_longer_do_is_deleted(client: openai.OpenAI) -> None:
    made = calls(client, "I don't work night shifts any more.", SHIFTS, TALK)

    assert [(name, arguments["key"]) for name, arguments in made] == [("delete_memory", "schedule")]


def test_a_new_weekday_or_time_replaces_the_old_one_in_place(client: openai.OpenAI) -> None:
    hiking = {"key": "schedule", "category": "schedule", "summary": "Walks with a hiking group on Saturdays"}

    [(_, weekday)] = calls(client, "The hiking group meets on Sundays these days.", hiking)
    [(_, time)] = calls(client, "Work starts at 6am now.", BAKER)

    assert weekday["summary"] == "Walks with a hiking group on Sundays"
    assert time["summary"] == "Starts work at 6am"


def test_what_is_said_in_place_of_the_old_fact_becomes_the_memory(client: openai.OpenAI) -> None:
    [(name, arguments)] = calls(
        client, "I've left the bakery \u2014 I drive a tram now, mostly afternoon shifts.", BAKER
    )

    assert (name, arguments["summary"]) == ("update_memory", "You drive a tram now, mostly afternoon shifts")


def test_a_correction_that_leaves_nothing_standing_takes_the_next_sentence_as_the_new_fact(
    client: openai.OpenAI,
) -> None:
    made = calls(client, "I quit the bakery last week. Started at a bank on Monday, 9 to 5.", BAKER)

    assert [(name, arguments["summary"]) for name, arguments in made] == [
        ("update_memory", "You started at a bank on Monday, 9 to 5")
    ]


def test_what_is_said_of_another_memory_does_not_become_the_corrected_one(client: openai.OpenAI) -> None:
    made = calls(client, "I've dropped the short story contest, the novel comes first.", CONTEST, NOVEL)

    assert [(name, arguments["key"]) for name, arguments in made] == [("delete_memory", "goal-short-story-contest")]


def test_a_protected_note_is_corrected_by_the_same_call_which_the_app_makes_a_suggestion(
    client: openai.OpenAI,
) -> None:
    made = calls(client, "I'm not allergic to peanuts any more.", PEANUTS, TALK)

    assert [(name, arguments["key"]) for name, arguments in made] == [("delete_memory", "allergy-1")]


@pytest.mark.parametrize(
    "text",
    [
        "Is my talk still in June?",
        "Actually, I'd love some help with my pacing on long runs.",
        "I'm now training three times a week for the half marathon.",
        "I no longer drink coffee.",
        "I'm also giving a talk in March at the library.",
        "I'm allergic to kiwi now.",
    ],
)
def test_questions_and_what_changes_no_memory_correct_nothing(client: openai.OpenAI, text: str) -> None:
    made = calls(client, text, TALK, RACE, SHIFTS, PACING, PEANUTS)

    assert {name for name, _ in made} <= {"save_memory"}


def answer_after(client: openai.OpenAI, name: str, arguments: dict[str, Any], result: dict[str, Any]) -> str:
    call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    memories = "\n".join(["# project", json.dumps(TALK), "# allergy", json.dumps(PEANUTS)])
    messages = [
        {"role": "system", "content": f"# Coach\n{TODAY}\n{memories}"},
        {"role": "user", "content": "Correcting you"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps(result)},
    ]
    return ask(client, messages).content or ""


def test_after_an_update_the_reply_says_the_new_fact_and_not_the_old(client: openai.OpenAI) -> None:
    update = {"key": "talk-june", "summary": "Giving a talk in July", "reason": "You told me: \u201c...\u201d"}

    reply = answer_after(client, "update_memory", update, {"status": "updated", "key": "talk-june"})

    assert "you're giving a talk in July." in reply
    assert "June" not in reply


def test_after_a_delete_the_reply_says_what_was_let_go(client: openai.OpenAI) -> None:
    delete = {"key": "talk-june", "reason": "You told me: \u201cThe talk is cancelled.\u201d"}

    reply = answer_after(client, "delete_memory", delete, {"status": "deleted", "key": "talk-june"})

    assert "talk in June" in reply.split("\n")[0]


def test_after_a_suggestion_the_reply_says_it_waits_for_the_person_to_confirm(client: openai.OpenAI) -> None:
    delete = {"key": "allergy-1", "reason": "You told me: \u201cI'm not allergic to peanuts any more.\u201d"}

    reply = answer_after(client, "delete_memory", delete, {"status": "proposed", "key": "allergy-1"})

    assert "memory page" in reply and "confirm" in reply
    assert "peanut" not in reply.lower()
