"""The rule-based coach behind the offline server: what it remembers, says and writes.

Driven over real HTTP with the openai SDK, as the app drives it; no test queues anything,
so every answer here is the rule-based coach's own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionMessage

from offline_coach import ModelServer
from offline_coach.flags import different_facts

TODAY = "Today: 2025-03-10"
KEY = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
ARGUMENT_KEYS = {"key", "tier", "category", "summary", "content", "due_at", "keep_separate"}
CATEGORIES = {
    *("injury", "safety", "medical", "allergy", "constraint", "background", "preference", "goal", "habit"),
    *("schedule", "feedback", "project", "reference", "episode", "other"),
}
MEMORY_TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}
    for name in ("save_memory", "update_memory", "forget_memory")
]
SHOULDER = {
    "key": "left-shoulder",
    "tier": "profile",
    "category": "injury",
    "source": "user",
    "summary": "Bad left shoulder: no overhead pressing",
    "content": "They have a bad left shoulder, so no overhead pressing.",
    "due_at": None,
}
TALK = {
    "key": "talk-june",
    "tier": "prospective",
    "category": "project",
    "source": "coach",
    "summary": "Giving a talk in June",
    "content": "They're giving a talk in June.",
    "due_at": "2025-06-01",
}
EPISODE = {
    "key": "week-2025-03-03",
    "tier": "episodic",
    "category": "episode",
    "source": "coach",
    "summary": "Three short runs; the shoulder held up on push-ups.",
    "content": "",
    "due_at": None,
}


@pytest.fixture(scope="module")
def running_server() -> Iterator[ModelServer]:
    with ModelServer(scripted=True) as server:
        yield server


@pytest.fixture
def client(running_server: ModelServer) -> openai.OpenAI:
    running_server.reset()
    return openai.OpenAI(base_url=running_server.base_url, api_key="offline", max_retries=0, timeout=5)


def system_prompt(heading: str, *memories: dict[str, Any], extra: str = "") -> dict[str, str]:
    lines = [heading, TODAY, "Name: Ada", extra, "## What you remember", *(json.dumps(memory) for memory in memories)]
    return {"role": "system", "content": "\n".join(lines)}


def ask(client: openai.OpenAI, *messages: dict[str, Any], **options: Any) -> ChatCompletionMessage:
    options.setdefault("tools", MEMORY_TOOLS)
    completion = client.chat.completions.create(model="offline-coach", messages=list(messages), **options)
    message = completion.choices[0].message
    assert completion.choices[0].finish_reason == ("tool_calls" if message.tool_calls else "stop")
    return message


def saves(client: openai.OpenAI, text: str, *, today: str = TODAY) -> list[dict[str, Any]]:
    system = {"role": "system", "content": f"# Coach\n{today}"}
    message = ask(client, system, {"role": "user", "content": text})
    calls = message.tool_calls or []
    assert all(call.function.name == "save_memory" for call in calls)
    if calls:
        assert message.content is None
    return [json.loads(call.function.arguments) for call in calls]


def only_save(client: openai.OpenAI, text: str, **options: str) -> dict[str, Any]:
    [save] = saves(client, text, **options)
    return save


def tool_round(
    name: str, arguments: dict[str, Any], result: dict[str, Any], call_id: str = "call_1"
) -> list[dict[str, Any]]:
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)},
    ]


def sentence_count(text: str) -> int:
    return len(re.findall(r"[.!?](?:\s|$)", text.strip()))


# What it notes down ------------------------------------------------------------------


def test_a_bad_left_shoulder_becomes_a_protected_injury_save_said_to_the_person(client: openai.OpenAI) -> None:
    save = only_save(client, "I have a bad left shoulder, so no overhead pressing.")

    assert save == {
        "key": "bad-left-shoulder",
        "tier": "profile",
        "category": "injury",
        "summary": "You have a bad left shoulder, so no overhead pressing",
        "content": "You have a bad left shoulder, so no overhead pressing.",
        "due_at": None,
        "keep_separate": None,
    }


# Filed by the classifier the app's import uses, the same words the same category on both sides.
FILED = [
    ("My right knee is injured.", "injury", "Your right knee is injured"),
    ("I hurt my back lifting boxes.", "injury", "You hurt your back lifting boxes"),
    ("I've got shoulder impingement.", "injury", "You've got shoulder impingement"),
    ("I'm allergic to peanuts.", "allergy", "You're allergic to peanuts"),
    ("I have a nut allergy.", "allergy", "You have a nut allergy"),
    ("I'm lactose intolerant.", "allergy", "You're lactose intolerant"),
    ("I take blood pressure medication, so go easy on the coffee.", "medical", None),
    ("I'm on beta blockers, so no high intensity intervals.", "medical", None),
    ("I use an inhaler for asthma.", "medical", "You use an inhaler for asthma"),
    ("I am on medication for my thyroid.", "medical", "You are on medication for your thyroid"),
    ("I don't eat meat.", "constraint", "You don't eat meat"),
    ("I never eat pork.", "constraint", "You never eat pork"),
    ("I'm vegetarian.", "constraint", "You're vegetarian"),
    ("No downhill running.", "constraint", "No downhill running"),
    ("Avoid jumping.", "constraint", "Avoid jumping"),
    ("I can't do burpees.", "constraint", "You can't do burpees"),
    ("Please, no downhill running because of my knee.", "constraint", None),
    ("I train on Mondays and Thursdays.", "schedule", "You train on Mondays and Thursdays"),
    ("I can only work out in the mornings.", "schedule", "You can only work out in the mornings"),
    ("I work night shifts.", "schedule", "You work night shifts"),
    ("My goal is to run a marathon.", "goal", "Your goal is to run a marathon"),
    ("I want to lose 5 kg.", "goal", "You want to lose 5 kg"),
    ("I'm trying to finish my novel.", "goal", "You're trying to finish your novel"),
]


@pytest.mark.parametrize(("statement", "category", "summary"), FILED)
def test_what_the_person_says_of_themselves_is_filed_by_the_shared_classifier_and_said_back_to_them(
    client: openai.OpenAI, statement: str, category: str, summary: str | None
) -> None:
    save = only_save(client, statement)

    assert (save["tier"], save["category"]) == ("profile", category)
    assert save["summary"] == (summary or save["summary"])
    assert save["summary"].startswith(("You", "No", "Avoid", "Please"))
    # A safety note's key is the app's to give; anything else is named by its topic.
    assert category in {"injury", "allergy", "medical", "constraint"} or save["key"].startswith(f"{category}-")


def test_taking_something_that_is_not_medicine_is_not_medication(client: openai.OpenAI) -> None:
    assert saves(client, "I take the train to work and my dog for a walk after.") == []


@pytest.mark.parametrize(
    "statement", ["I prefer blunt feedback.", "Please keep answers short.", "Don't sugar-coat it."]
)
def test_how_they_like_to_be_coached_is_a_rule_with_why_and_how(client: openai.OpenAI, statement: str) -> None:
    save = only_save(client, statement)

    assert (save["key"], save["tier"], save["category"]) == ("coaching-style", "profile", "feedback")
    rule, why, how = save["content"].split("\n")
    assert rule
    assert why.startswith("Why: ") and statement in why
    assert how.startswith("How to apply: ")


def test_a_talk_in_june_is_due_on_the_first_of_june(client: openai.OpenAI) -> None:
    save = only_save(client, "I'm giving a talk in June.")

    assert save == {
        "key": "talk-june",
        "tier": "prospective",
        "category": "project",
        "summary": "You're giving a talk in June",
        "content": "You're giving a talk in June.\nDue: June 2025.",
        "due_at": "2025-06-01",
        "keep_separate": None,
    }


def test_a_month_already_past_this_year_means_next_years(client: openai.OpenAI) -> None:
    save = only_save(client, "I'm giving a talk in June.", today="Today: 2025-07-02")

    assert save["due_at"] == "2026-06-01"


@pytest.mark.parametrize(
    ("statement", "key", "due_at"),
    [
        ("I have a marathon on 12 May.", "marathon-may", "2025-05-12"),
        ("I have a marathon on 1 March.", "marathon-march", "2026-03-01"),
        ("My exam is next month.", "exam-april", "2025-04-01"),
        ("My job interview is next week.", "job-interview-march", "2025-03-17"),
    ],
)
def test_a_dated_intention_is_prospective_and_resolved_from_today(
    client: openai.OpenAI, statement: str, key: str, due_at: str
) -> None:
    save = only_save(client, statement)

    assert (save["key"], save["tier"], save["category"], save["due_at"]) == (key, "prospective", "project", due_at)


def test_several_statements_are_saved_in_the_order_they_were_said(client: openai.OpenAI) -> None:
    found = saves(client, "I'm allergic to peanuts and I have a bad left shoulder. Also, I train on Mondays.")

    assert [save["category"] for save in found] == ["allergy", "injury", "schedule"]


def test_every_save_is_well_formed(client: openai.OpenAI) -> None:
    found = saves(
        client,
        "I have a bad left shoulder and I can't do overhead pressing or anything with a barbell above my head,"
        " which has been the case since my rotator cuff surgery two years ago. I'm allergic to shellfish. "
        "My goal is to finish the Rönnells antikvariat reading list. I'm giving a talk in June. I prefer blunt "
        "feedback. I don't eat meat. I work night shifts.",
    )

    assert len(found) == 7
    for save in found:
        assert set(save) == ARGUMENT_KEYS
        assert KEY.match(save["key"]) and len(save["key"]) <= 64
        assert save["tier"] in {"profile", "episodic", "prospective"}
        assert save["category"] in CATEGORIES
        assert 0 < len(save["summary"]) <= 150 and "\n" not in save["summary"]
        assert (save["due_at"] is not None) == (save["tier"] == "prospective")


PHRASES = [
    *("I have a bad left shoulder", "my right knee is injured", "I'm allergic to peanuts", "I don't eat meat"),
    *("I train on Mondays", "my goal is to run a marathon", "I prefer blunt feedback", "I'm giving a talk in June"),
    *("on 31 February", "next month", "and", "so no overhead pressing", ",", ".", "?", "I had coffee", "Rönnells"),
]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(PHRASES) | st.text(max_size=20), max_size=8))
def test_whatever_the_user_writes_the_coach_answers_and_every_save_is_well_formed(
    running_server: ModelServer, pieces: list[str]
) -> None:
    client = openai.OpenAI(base_url=running_server.base_url, api_key="offline", max_retries=0, timeout=5)
    system = {"role": "system", "content": f"# Coach\n{TODAY}"}

    message = ask(client, system, {"role": "user", "content": " ".join(pieces)})

    assert message.content or message.tool_calls
    for call in message.tool_calls or []:
        save = json.loads(call.function.arguments)
        assert set(save) == ARGUMENT_KEYS
        assert KEY.match(save["key"]) and len(save["key"]) <= 64
        assert 0 < len(save["summary"]) <= 150 and "\n" not in save["summary"]


@pytest.mark.parametrize("statement", ["I had coffee this morning.", "hello", "What should I eat before a run?"])
def test_small_talk_and_questions_save_nothing(client: openai.OpenAI, statement: str) -> None:
    assert saves(client, statement) == []


def test_without_the_save_tool_an_injury_gets_a_plain_answer(client: openai.OpenAI) -> None:
    system = {"role": "system", "content": "# Coach"}

    message = ask(client, system, {"role": "user", "content": "My right knee is injured."}, tools=None)

    assert message.tool_calls is None
    assert message.content


def test_tool_choice_none_gets_a_plain_answer(client: openai.OpenAI) -> None:
    system = {"role": "system", "content": "# Coach"}

    message = ask(client, system, {"role": "user", "content": "My right knee is injured."}, tool_choice="none")

    assert message.tool_calls is None


# What it says ------------------------------------------------------------------------


def test_the_reply_after_a_save_takes_it_in_and_brings_up_the_injury_it_bears_on(client: openai.OpenAI) -> None:
    goal = {"key": "goal-run-marathon", "tier": "profile", "category": "goal", "summary": "Goal: run a marathon"}
    saved = {"status": "saved", "key": "goal-run-marathon", "created": True}
    message = ask(
        client,
        system_prompt("# Coach", SHOULDER),
        {"role": "user", "content": "My goal is to run a marathon."},
        *tool_round("save_memory", {**goal, "content": "Their goal is to run a marathon.", "due_at": None}, saved),
    )

    assert message.tool_calls is None
    assert "your goal is to run a marathon" in message.content
    # A marathon is exercise: the injury bears on it, said back in the person's terms.
    assert "you have a bad left shoulder, which rules out overhead pressing" in message.content
    assert not re.search(r"memor|sav|tool|goal-run-marathon|\{", message.content, re.IGNORECASE)
    assert message.content.count("?") == 1 and message.content.endswith("?")


def test_the_reply_to_small_talk_brings_up_nothing_it_does_not_touch_and_asks_one_question(
    client: openai.OpenAI,
) -> None:
    message = ask(client, system_prompt("# Coach", TALK, SHOULDER), {"role": "user", "content": "I had coffee."})

    assert "shoulder" not in message.content and "talk in June" not in message.content
    assert message.content.count("?") == 1 and message.content.endswith("?")


def test_a_save_refused_as_a_duplicate_is_merged_with_update_memory_once(client: openai.OpenAI) -> None:
    refused = {
        "key": "left-shoulder-pain",
        "tier": "profile",
        "category": "injury",
        "summary": "Sore left shoulder: avoid overhead presses",
        "content": "Their left shoulder is sore; avoid overhead presses.",
        "due_at": None,
    }
    duplicates = {"ok": False, "duplicates": [{"key": "left-shoulder", "summary": SHOULDER["summary"]}]}
    conversation = [
        system_prompt("# Coach", SHOULDER),
        {"role": "user", "content": "My left shoulder is sore, avoid overhead presses."},
        *tool_round("save_memory", refused, duplicates),
    ]

    merge = ask(client, *conversation)

    [call] = merge.tool_calls
    assert call.function.name == "update_memory"
    arguments = json.loads(call.function.arguments)
    # Strict schemas require every property: `clear` too, null when nothing is emptied.
    assert set(arguments) == {"key", "summary", "content", "tier", "category", "due_at", "status", "clear", "reason"}
    assert arguments["key"] == "left-shoulder"
    assert arguments["summary"] == refused["summary"]
    assert refused["content"] in arguments["content"]
    assert (arguments["tier"], arguments["category"], arguments["status"], arguments["clear"]) == (None,) * 4

    merged_again = {"ok": False, "duplicates": [{"key": "left-shoulder"}]}
    answer = ask(client, *conversation, *tool_round("update_memory", arguments, merged_again, call_id="call_2"))

    assert answer.tool_calls is None
    assert "left shoulder" in answer.content


# What it writes ----------------------------------------------------------------------


def test_a_session_summary_is_built_from_the_conversation(client: openai.OpenAI) -> None:
    transcript = (
        "User: My shoulder is sore after pressing.\n"
        "Assistant: Let's swap overhead pressing for band work this week.\n"
        "User: OK. I'm giving a talk in June, so I'm stressed.\n"
        "Assistant: We'll keep sessions light in the weeks before the talk."
    )

    summary = ask(client, system_prompt("# Session summary"), {"role": "user", "content": transcript}).content

    assert "shoulder" in summary
    assert "giving a talk in June" in summary
    assert "keep sessions light" in summary
    assert 2 <= sentence_count(summary) <= 4


def test_a_weekly_episode_summarises_the_sessions_listed(client: openai.OpenAI) -> None:
    week = (
        "Sessions this week:\n"
        "- 2025-03-03: Easy 5k run, shoulder fine.\n"
        "- 2025-03-05: Band work for the shoulder and core.\n"
        "- 2025-03-07: Long walk; sleep has been better."
    )

    episode = ask(client, system_prompt("# Weekly episode"), {"role": "user", "content": week}).content

    assert episode.startswith("This week had 3 sessions.")
    assert "shoulder" in episode
    assert "sleep has been better" in episode
    assert 2 <= sentence_count(episode) <= 4


def test_a_follow_up_email_has_a_subject_and_uses_the_talk_that_is_due(client: openai.OpenAI) -> None:
    email = ask(client, system_prompt("# Follow-up email", SHOULDER, TALK, EPISODE)).content

    subject, blank, *body = email.split("\n")
    assert subject.startswith("Subject: ") and len(subject) > len("Subject: ")
    assert blank == ""
    text = "\n".join(body)
    assert "Ada" in text
    assert "your talk in June" in text
    assert "left shoulder" in text
    assert 3 <= sentence_count(text.split("\n\n")[1]) <= 6


def test_consecutive_follow_up_emails_differ_in_subject_opening_and_focus(client: openai.OpenAI) -> None:
    first = ask(client, system_prompt("# Follow-up email", SHOULDER, TALK, EPISODE)).content
    previous = "Previous email: " + first
    second = ask(client, system_prompt("# Follow-up email", SHOULDER, TALK, EPISODE, extra=previous)).content

    first_lines, second_lines = first.split("\n"), second.split("\n")
    assert first_lines[0] != second_lines[0], "subject"
    assert first_lines[2] != second_lines[2], "greeting"
    first_body, second_body = first.split("\n\n")[2], second.split("\n\n")[2]
    assert first_body.split(". ")[0] != second_body.split(". ")[0], "opening sentence"
    assert "talk in June" in first_body
    assert "talk in June" not in second_body
    assert "three short runs" in second_body.lower(), "the recent episode is the next focus"


def test_a_check_in_is_about_the_intention_asked_for_with_a_next_step_and_unlike_a_nudge(
    client: openai.OpenAI,
) -> None:
    ask_for = (
        "Write a check-in about something they have coming up on 2025-03-24: “Giving a talk at the library”. "
        "Ask how it is going, and offer one concrete next step."
    )
    check_in = ask(
        client, system_prompt("# Follow-up email", SHOULDER, TALK, EPISODE), {"role": "user", "content": ask_for}
    ).content
    nudge = ask(client, system_prompt("# Follow-up email", SHOULDER, TALK, EPISODE)).content

    subject = check_in.split("\n")[0]
    assert "talk" in subject.lower()
    assert "14 days away, on Monday 24 March" in check_in
    assert "One concrete step:" in check_in
    assert check_in.split("\n\n")[2] != nudge.split("\n\n")[2]


def test_the_same_email_request_gets_the_same_draft(client: openai.OpenAI) -> None:
    request = system_prompt("# Follow-up email", SHOULDER, TALK, extra="Previous email: Subject: Hello\nHi Ada.")

    assert ask(client, request).content == ask(client, request).content


def test_a_dated_intention_flagged_as_like_its_undated_goal_is_kept_apart() -> None:
    race = {"key": "half-marathon-april", "summary": "Half marathon on 12 April", "due_at": "2026-04-12"}
    goal = {"key": "goal-half-marathon", "summary": "Training for a half marathon"}

    assert different_facts(race, goal)
    assert not different_facts({**race, "due_at": None, "summary": "Half marathon"}, goal)


def test_a_goal_the_person_says_they_dropped_is_deleted_and_safety_notes_never_are(client: openai.OpenAI) -> None:
    contest = {"key": "goal-short-story-contest", "summary": "Goal: enter the short story contest", "content": "x"}
    novel = {"key": "goal-finish-novel", "summary": "Goal: finish the first draft of the novel", "content": "x"}
    wrist = {"key": "injury-1", "summary": "Right wrist tendinitis: no marathon typing", "content": "x"}
    memories = "\n".join(["# injury", json.dumps(wrist), "# goal", json.dumps(contest), json.dumps(novel)])
    tools = [*MEMORY_TOOLS, {"type": "function", "function": {"name": "delete_memory", "parameters": {}}}]

    message = ask(
        client,
        {"role": "system", "content": f"# Coach\n{TODAY}\n{memories}"},
        {"role": "user", "content": "I've dropped the short story contest, the novel comes first. And the wrist."},
        tools=tools,
    )

    calls = [(call.function.name, json.loads(call.function.arguments)) for call in message.tool_calls or []]
    assert [(name, arguments["key"]) for name, arguments in calls] == [("delete_memory", "goal-short-story-contest")]
    assert "dropped the short story contest" in calls[0][1]["reason"]
