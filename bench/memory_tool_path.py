"""The model's tool calls as a turn makes them, for bin/bench memory: what the app itself
spends on a save and a search through `run_tool`, its embedding request included, and
what a change of EMBEDDING_MODEL costs the first save after it.

Imported by bench/memory.py once Django is set up.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

from django.test import override_settings
from django.utils import timezone

from accounts.models import User
from bench.memory_seed import EPISODES, PER_USER, SHORT_TEXTS
from bench.timing import measure
from infra import llm
from infra.llm import Embedding
from memory.drafts import MemoryDraft
from memory.models import key_digest
from memory.selectors import memories_by_similarity
from memory.services import memory_save
from memory.tools import ToolContext, run_tool
from offline_coach import bag_of_words_embedding

# The embedding model a store was kept under before EMBEDDING_MODEL changed.
BEFORE = "the-model-before"
SAVES = itertools.count()


def measure_tool_path(runs: int) -> dict[str, tuple[float, float, int]]:
    """The model's tool calls as the turn makes them (`run_tool`, arguments as JSON text),
    for a person with 74 memories, against an embeddings server that answers at once (the
    offline coach's bag of words, in a process of its own): what the app itself spends on
    a save and a search, its embedding request included."""
    port = 8799
    server = subprocess.Popen([sys.executable, "-m", "offline_coach", "--port", str(port)], stdout=subprocess.PIPE)
    try:
        server.stdout.readline()  # its one status line: serving
        with override_settings(OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1", OPENAI_API_KEY=""):
            # Waits for its sentence model to load, which would otherwise take CPU mid-measurement.
            llm.embed(["warm up"])
        calls = _ToolCalls(_person_of_73_memories())
        with override_settings(
            OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1", OPENAI_API_KEY="", EMBEDDING_MODEL="bag-of-words"
        ):
            save = measure(calls.save, runs, after=calls.forget_saved)
            search = measure(calls.search, runs)
            changed = min(runs, 50)
            first = measure(calls.first_after_the_model_changed, changed, after=calls.embedded_by_the_model_before)
            both = measure(calls.with_the_model_before_too, runs, after=calls.forget_saved)
        return {
            "save_memory through run_tool (a new key, the 74th memory)": save,
            "search_memories through run_tool (73 memories)": search,
            "save_memory, the first after EMBEDDING_MODEL changed (re-embeds the 73 first)": first,
            "save_memory embedding its text by the model before as well (the alternative, each save)": both,
        }
    finally:
        server.terminate()
        server.wait(timeout=30)


def _person_of_73_memories() -> User:
    """14 weekly episodes and 59 notes: a save brings the store to its 74 (60 besides the
    episodes) without evicting, as most saves do; evicting saves are measured apart."""
    person = User.objects.create_user("bench-tools@example.com", "x", onboarded_at=timezone.now())
    for n in range(PER_USER - 1):
        text = f"{SHORT_TEXTS[n % len(SHORT_TEXTS)]} (note {n})"
        category = "episode" if n < EPISODES else "habit"
        draft = MemoryDraft(key=f"note-{n}", tier="episodic", category=category, summary=text, content=text)
        embedding = Embedding(bag_of_words_embedding(text), "bag-of-words")
        memory_save(user=person, draft=draft, source="coach", actor="coach", embedding=embedding)
    assert person.memories.count() == PER_USER - 1
    return person


class _ToolCalls:
    """The calls measured, each as one run of a turn's tool call, and what undoes them."""

    def __init__(self, person: User) -> None:
        self.person = person
        self.context = ToolContext(user=person)
        self.saved: list[str] = []

    def save(self, run: int) -> None:
        key = f"tool-save-{next(SAVES)}"
        arguments = {
            "key": key,
            "tier": "episodic",
            "category": "habit",
            # Words no other note has, so the save is not refused as a near-copy.
            "summary": f"Swims {run} lengths on Tuesdays zq{run}x",
            "content": f"Swims {run} lengths on Tuesdays at the lido zq{run}x",
            "due_at": None,
            "keep_separate": None,
        }
        self.context.writes = self.context.write_calls = 0
        result = json.loads(run_tool(self.context, "save_memory", json.dumps(arguments)))
        assert result["status"] == "saved", result
        self.saved.append(key)

    def forget_saved(self) -> None:
        digests = [key_digest(self.person.pk, key) for key in self.saved]
        self.person.memories.filter(key_digest__in=digests).delete()
        self.saved.clear()

    def search(self, run: int) -> None:
        arguments = json.dumps({"query": "weekend runs", "limit": None})
        result = json.loads(run_tool(self.context, "search_memories", arguments))
        assert result["status"] == "found", result

    def first_after_the_model_changed(self, run: int) -> None:
        # A turn of its own: the first save of a turn looks at the store's models.
        self.context.embedded_by = None
        self.save(run)

    def embedded_by_the_model_before(self) -> None:
        self.forget_saved()
        self.person.memories.update(embedding_model=BEFORE)

    def with_the_model_before_too(self, run: int) -> None:
        # The road not taken: each save's text embedded by the older model as well (one more
        # request), and compared with that model's memories (one more query).
        self.save(run)
        vector = llm.embed([f"Swims {run} lengths on Tuesdays zq{run}x"])[0].vector
        memories_by_similarity(user=self.person, vector=vector, model=BEFORE, limit=5, in_use_only=True)
