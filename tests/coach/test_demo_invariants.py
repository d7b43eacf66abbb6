"""Whatever a person says, in whatever order, the demo keeps its promises: a state machine
of hostile sequences (facts, corrections, questions, a crisis, noise, a new conversation)
drives the offline coach over real HTTP, with a small stand-in for the app that applies its
tool calls to a store and answers as the app's tools do.

After every turn: the turn ends in words within the app's rounds; every call is one of the
app's tools with well-formed arguments; no sentence of a reply came in an earlier reply of
the conversation; no reply after a correction says the corrected detail; a crisis writes
nothing; no memory text is pasted in ungrammatically.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from offline_coach import ModelServer
from tests.coach.test_demo_walk import UNGRAMMATICAL, sentences

TOOL_NAMES = ("save_memory", "update_memory", "delete_memory", "search_memories", "search_conversations")
TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}
    for name in TOOL_NAMES
]
# The app's rounds: four with tools, then one for words.
ROUNDS = 5
PROTECTED = frozenset({"injury", "safety", "medical", "allergy", "constraint"})
FACTS = (
    "I have a sprained right ankle, so no jumping.",
    "I'm allergic to shellfish.",
    "I row on Mondays and Thursdays.",
    "I'm sitting my driving test in June.",
    "I work as a nurse on the children's ward.",
    "My goal is to row 2000 metres under eight minutes.",
)
# Each correction, and the detail no later reply of the conversation may say.
CORRECTIONS = (
    ("The driving test moved to September.", "june"),
    ("I row on Tuesdays these days.", "mondays"),
    ("I'm no longer a nurse, I teach piano now.", "nurse"),
    ("Forget the 2000 metres goal, I gave up rowing for now.", "2000"),
)
QUESTIONS = (
    "What should I eat before training?",
    "Can you plan my week?",
    "When is my driving test?",
    "Is it OK to do box jumps?",
    "How can I sleep better?",
    "What do you remember about me?",
)
CRISES = ("I want to end my life.", "My husband hits me.", "I have chest pains and can't breathe.")


class StandInApp:
    """The app's side of the memory tools, as the demo meets them: a store per person, a
    search by shared words (best first), and protected memories that change only when the
    person confirms."""

    def __init__(self) -> None:
        self.store: dict[str, dict[str, Any]] = {}
        self.notes: list[str] = []

    def prompt(self) -> str:
        lines = ["# Coach", "Today: 2026-03-10", "<<MEMORIES n>>"]
        lines += [json.dumps({k: v for k, v in m.items()}) for m in self.store.values()]
        return "\n".join([*lines, "<<END MEMORIES n>>", *self.notes])

    def run(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if name == "search_memories":
            asked = set(re.findall(r"[a-z0-9]+", str(arguments["query"]).lower()))
            scored = [
                (len(asked & set(re.findall(r"[a-z0-9]+", m["summary"].lower()))), m) for m in self.store.values()
            ]
            found = [m for score, m in sorted(scored, key=lambda pair: -pair[0]) if score]
            return {
                "status": "found",
                "memories": [{k: m[k] for k in ("key", "tier", "category", "summary")} for m in found],
            }
        if name == "search_conversations":
            return {"status": "found", "exchanges": 0, "text": ""}
        key = str(arguments["key"])
        if name == "save_memory":
            self.store[key] = {k: arguments[k] for k in ("key", "tier", "category", "summary", "content")}
            return {"status": "saved", "key": key, "created": True}
        if key not in self.store:
            return {"status": "error", "error": f"no memory {key}"}
        if self.store[key]["category"] in PROTECTED:
            self.notes.append(f"[memory note, 10 Mar] You suggested a change to {key}; it stays as it is.")
            return {"status": "proposed", "key": key}
        if name == "delete_memory":
            del self.store[key]
            return {"status": "deleted", "key": key}
        self.store[key] |= {k: arguments[k] for k in ("summary", "content") if arguments.get(k)}
        return {"status": "updated", "key": key}


@pytest.fixture(scope="module")
def llm() -> Iterator[openai.OpenAI]:
    with ModelServer(scripted=True) as server:
        yield openai.OpenAI(base_url=server.base_url, api_key="offline", max_retries=0, timeout=10)


class WhateverAPersonSaysTheDemoKeepsItsPromises(RuleBasedStateMachine):
    llm: openai.OpenAI

    @initialize()
    def start(self) -> None:
        self.app = StandInApp()
        self.history: list[dict[str, Any]] = []
        self.stale: set[str] = set()
        self.last_reply = ""
        self.last_writes: list[str] = []
        self.last_text = ""
        self.correcting = False

    def turn(self, text: str) -> None:
        self.last_text, self.correcting = text, False
        messages: list[dict[str, Any]] = [*self.history, {"role": "user", "content": text}]
        writes = []
        for _ in range(ROUNDS):
            system = {"role": "system", "content": self.app.prompt()}
            message = (
                self.llm.chat.completions.create(model="offline-coach", messages=[system, *messages], tools=TOOLS)
                .choices[0]
                .message
            )
            if not message.tool_calls:
                break
            messages.append(
                {"role": "assistant", "content": None, "tool_calls": [c.model_dump() for c in message.tool_calls]}
            )
            for call in message.tool_calls:
                assert call.function.name in TOOL_NAMES
                arguments = json.loads(call.function.arguments)
                assert isinstance(arguments, dict) and (call.function.name.startswith("search") or arguments.get("key"))
                if call.function.name not in {"search_memories", "search_conversations"}:
                    writes.append(call.function.name)
                result = self.app.run(call.function.name, arguments)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
        assert message.content, "the turn ended without words within the app's rounds"
        self.last_reply, self.last_writes = message.content, writes
        earlier = {s for m in self.history if m["role"] == "assistant" for s in sentences(m["content"])}
        # Where to find help in a crisis is said as often as it is needed.
        repeated = {s for s in earlier & set(sentences(message.content)) if "emergency number" not in s}
        assert not repeated, f"said again in this conversation: {repeated}"
        self.history += [{"role": "user", "content": text}, {"role": "assistant", "content": message.content}]

    @rule(text=st.sampled_from(FACTS))
    def tell(self, text: str) -> None:
        # Told again, a corrected detail is the person's news once more.
        self.stale = {stale for stale in self.stale if stale not in text.lower()}
        self.turn(text)

    @rule(correction=st.sampled_from(CORRECTIONS))
    def correct(self, correction: tuple[str, str]) -> None:
        self.turn(correction[0])
        if any(write != "save_memory" for write in self.last_writes):
            self.stale.add(correction[1])
        # The reply to the correction may name what it let go of; none after it may.
        self.correcting = True

    @rule(text=st.sampled_from(QUESTIONS))
    def ask(self, text: str) -> None:
        self.turn(text)

    @rule(text=st.sampled_from(CRISES))
    def in_crisis(self, text: str) -> None:
        self.turn(text)
        assert self.last_writes == [] and "emergency number" in self.last_reply

    @rule(text=st.text(max_size=40))
    def noise(self, text: str) -> None:
        if text.strip():
            self.turn(text)

    @rule()
    def new_conversation(self) -> None:
        self.history, self.stale = [], set()

    @invariant()
    def no_corrected_detail_said_again(self) -> None:
        if not self.correcting:
            said = {stale for stale in self.stale if stale in self.last_reply.lower()}
            assert not said, f"{self.last_text!r} got {self.last_reply!r}"

    @invariant()
    def nothing_pasted_ungrammatically(self) -> None:
        assert not UNGRAMMATICAL.search(self.last_reply), self.last_reply


TestWhateverAPersonSaysTheDemoKeepsItsPromises = WhateverAPersonSaysTheDemoKeepsItsPromises.TestCase
TestWhateverAPersonSaysTheDemoKeepsItsPromises.settings = settings(
    max_examples=10, stateful_step_count=10, deadline=None
)


@pytest.fixture(autouse=True)
def _client(llm: openai.OpenAI) -> None:
    WhateverAPersonSaysTheDemoKeepsItsPromises.llm = llm
