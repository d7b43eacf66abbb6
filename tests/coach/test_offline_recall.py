"""The offline coach on its own memory: "what do you remember about me?" answered from the
index, grouped, and an intention that is due raised once. Over real HTTP, as the app drives it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from coach.rendering import render_reply
from offline_coach import ModelServer

TODAY = "Today: 2025-05-30 (Friday)"
TALK = {"key": "talk-june", "tier": "prospective", "summary": "Giving a talk in June", "due_at": "2025-06-01"}
KNEE = {"key": "injury-1", "tier": "profile", "source": "the person", "summary": "Bad left knee"}
STYLE = {"key": "coaching-style", "tier": "profile", "summary": "Wants short, to-the-point answers"}
WEEK = {"key": "week-2025-05-19", "tier": "episodic", "summary": "Three short runs and a long one"}


@pytest.fixture(scope="module")
def running_server() -> Iterator[ModelServer]:
    with ModelServer(scripted=True) as server:
        yield server


@pytest.fixture
def client(running_server: ModelServer) -> openai.OpenAI:
    running_server.reset()
    return openai.OpenAI(base_url=running_server.base_url, api_key="offline", max_retries=0, timeout=5)


def memory_block(**topics: list[dict[str, Any]]) -> str:
    lines = ["<<MEMORIES n>>"]
    for topic, memories in topics.items():
        lines.append(f"# {topic}")
        lines += [json.dumps(memory) for memory in memories]
    return "\n".join([*lines, "<<END MEMORIES n>>"])


def reply(client: openai.OpenAI, block: str, *turns: str) -> str:
    messages = [{"role": "system", "content": f"# Coach\n{TODAY}\n{block}"}]
    messages += [{"role": "user" if n % 2 == 0 else "assistant", "content": text} for n, text in enumerate(turns)]
    completion = client.chat.completions.create(model="offline-coach", messages=messages)
    return completion.choices[0].message.content or ""


def test_what_it_remembers_is_the_index_grouped_safety_first_in_the_persons_terms(client: openai.OpenAI) -> None:
    # Notes not quoted whole have their index line only.
    index = "\n".join(
        [
            *("# schedule", "- schedule (2025-05-01): Works night shifts"),
            *("# project", "- race-april (2025-05-01): 10k in April"),
        ]
    )
    block = memory_block(feedback=[STYLE], injury=[KNEE], episode=[WEEK]).replace("<<END", f"{index}\n<<END")

    answer = reply(client, block, "What do you remember about me?")

    assert answer == (
        "Here's what I keep in mind about you:\n\n"
        "**Health and safety**\n- You have a bad left knee\n\n"
        "**Goals and plans**\n- 10k in April\n\n"
        "**Your routine**\n- You work night shifts\n\n"
        "**How you like to be coached**\n- You want short, to-the-point answers\n\n"
        "If any of it is out of date, tell me, or change it on your memory page."
    )
    # Within what the chat renders: bold and lists, nothing stripped.
    assert render_reply(answer).count("<strong>") == 4 and render_reply(answer).count("<li>") == 4


def test_with_nothing_remembered_it_says_so_and_asks(client: openai.OpenAI) -> None:
    assert reply(client, memory_block(), "What do you know about me?").startswith("I don't know much about you yet.")


def test_an_intention_that_is_due_is_raised_once_as_the_closing_question(client: openai.OpenAI) -> None:
    block = memory_block(project=[{**TALK, "bring_up": "now"}], injury=[KNEE])

    first = reply(client, block, "Hello!")
    later = reply(client, block, "Hello!", first, "Thanks, good week so far.")

    assert first.endswith("Your talk in June is coming up: how is it going?")
    assert "talk in June" not in later


def test_an_intention_not_yet_due_is_not_raised(client: openai.OpenAI) -> None:
    assert "talk in June" not in reply(client, memory_block(project=[TALK]), "Hello!")
