"""A plan from the offline coach: a short Markdown list with bold day names, shaped by what
it remembers. Over real HTTP with the openai SDK, as the app drives it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import openai
import pytest

from coach.rendering import render_reply
from offline_coach import ModelServer

TODAY = "Today: 2025-03-10 (Monday)"
KNEE = {"key": "injury-1", "tier": "profile", "source": "the person", "summary": "Bad left knee"}
SHIFTS = {"key": "schedule", "tier": "profile", "summary": "Works night shifts"}
RACE = {"key": "half-marathon-april", "tier": "prospective", "summary": "Training for a half marathon in April"}
DAY_LINE = re.compile(r"^- \*\*(Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)\*\*: .+$", re.MULTILINE)


@pytest.fixture(scope="module")
def running_server() -> Iterator[ModelServer]:
    with ModelServer(scripted=True) as server:
        yield server


@pytest.fixture
def client(running_server: ModelServer) -> openai.OpenAI:
    running_server.reset()
    return openai.OpenAI(base_url=running_server.base_url, api_key="offline", max_retries=0, timeout=5)


def reply(client: openai.OpenAI, text: str, *memories: tuple[str, dict]) -> str:
    block = "\n".join(line for topic, memory in memories for line in (f"# {topic}", json.dumps(memory)))
    messages = [
        {"role": "system", "content": f"# Coach\n{TODAY}\n<<MEMORIES n>>\n{block}\n<<END MEMORIES n>>"},
        {"role": "user", "content": text},
    ]
    return client.chat.completions.create(model="offline-coach", messages=messages).choices[0].message.content or ""


def test_a_plan_is_a_list_of_bold_days_around_the_injury_the_shifts_and_the_race(client: openai.OpenAI) -> None:
    plan = reply(client, "Can you plan my training week?", ("injury", KNEE), ("schedule", SHIFTS), ("project", RACE))

    assert [match.group(1) for match in DAY_LINE.finditer(plan)] == [
        "Monday", "Wednesday", "Thursday", "Saturday", "Sunday"
    ]  # fmt: skip
    assert "Since you have a bad left knee, we'll keep the impact low" in plan
    assert "**Wednesday**: bike or pool" in plan
    assert "the one that builds towards your race" in plan
    assert plan.endswith("I've put each session after your sleep, since you work night shifts.")
    html = render_reply(plan)
    assert html.count("<li>") == 5 and "<strong>Monday</strong>" in html


def test_with_nothing_remembered_the_plan_is_the_plain_one(client: openai.OpenAI) -> None:
    plan = reply(client, "Could you sketch out a weekly plan?")

    assert len(DAY_LINE.findall(plan)) == 5
    assert "**Wednesday**: intervals" in plan
    assert "shift" not in plan and "race" not in plan


@pytest.mark.parametrize("text", ["I planned to rest today.", "How was your week?", "My plan is working."])
def test_what_does_not_ask_for_a_plan_gets_no_list(client: openai.OpenAI, text: str) -> None:
    assert not DAY_LINE.search(reply(client, text, ("injury", KNEE)))
