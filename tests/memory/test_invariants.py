"""The memory's promises, whatever the model sends.

A hypothesis state machine plays a hostile or careless model for two people: any
sequence of the five tools with valid and invalid arguments, escalations into protected
categories, deletes and rewrites of protected memories, several saves in one response,
oversized text, garbage. Between its turns the people write too: they add, edit (into any
category), keep and delete memories and answer the coach's suggestions; staff add and
change memories through the admin; and weekly episodes are written.
After every step the invariants below are checked against the database.

The ceilings are small here (6 memories, 2 weekly episodes, 9 of the person's own) so
that a few dozen steps reach them; the rule is the same at 60, 14 and 500.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from dataclasses import dataclass, replace

import pytest
from django.conf import settings as django_settings
from django.utils import timezone
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from accounts.models import User
from memory.context import LEFT_OUT, assemble_memory_context
from memory.drafts import MemoryDraft, MemoryIsProtected, MemoryWriteError
from memory.episodes import weekly_episode_save
from memory.models import Category, Memory, MemoryEvent, MemoryProposal, Source, Tier
from memory.policy import PROTECTED_CATEGORIES, USER_SOURCES
from memory.proposals import proposal_confirm, proposal_make, proposal_reject
from memory.services import memory_add_by_user, memory_delete, memory_edit_by_user, memory_keep, memory_save
from memory.tools import ToolContext, run_tool
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

MAX_STORED = 6
MAX_EPISODES = 2
MAX_PER_PERSON = 9
# Fixed parts, and the index lines of a full store, fit; full texts compete for the rest.
BUDGET = 1200
EPISODE = Category.EPISODE
# Whatever changes a memory moves its version on by one and records one of these.
CHANGES = {
    MemoryEvent.Action.CREATED,
    MemoryEvent.Action.UPDATED,
    MemoryEvent.Action.MERGED,
    MemoryEvent.Action.RESTORED,
    MemoryEvent.Action.PROPOSAL_CONFIRMED,
    MemoryEvent.Action.RAISED,
}
BIRTHS = {MemoryEvent.Action.CREATED, MemoryEvent.Action.RESTORED}
GONE = {MemoryEvent.Action.DELETED, MemoryEvent.Action.EVICTED, MemoryEvent.Action.PROPOSAL_CONFIRMED}


def mostly(valid: st.SearchStrategy, *invalid: object) -> st.SearchStrategy:
    """Valid values three times in four; otherwise something the schema or the rules refuse."""
    return st.one_of(valid, valid, valid, st.sampled_from(invalid)) if invalid else valid


keys = mostly(
    st.sampled_from(["tea", "run", "talk", "shoulder", "oats", "week", "injury-1", "allergy-1", "medical-1"]),
    "x" * 70,
    "",
    "Not A Key",
)
tiers = mostly(st.sampled_from(Tier.values), "diary", "")
categories = mostly(st.sampled_from(Category.values), "secret")
words = st.text(alphabet="abcdefgh xyz.\n\"'<>", min_size=0, max_size=40)
sentences = st.text(alphabet="abcdefgh xyz.\"'<>", min_size=1, max_size=60).filter(str.strip)
texts = mostly(sentences, "y" * 2100, "z" * 160, "")
dates = st.one_of(
    st.none(),
    st.none(),
    st.sampled_from(["2031-06-01", "2031-06-01T09:00:00Z"]),
    st.sampled_from(["2020-01-01", "soon", "2031-13-40", "x" * 60]),
)
statuses = st.one_of(st.none(), st.none(), st.sampled_from(["open", "raised", "done", "dismissed"]), st.just("lost"))
clears = st.one_of(st.none(), st.none(), st.just(["due_at"]), st.just(["summary"]))
maybe = st.one_of  # for readability below: maybe(st.none(), x) is "null, or x"


@dataclass(frozen=True)
class Shape:
    """What a protected memory says: the model may never change any of it."""

    key: str
    tier: str
    category: str
    source: str
    summary: str
    content: str
    due_at: object
    status: str


def shape(memory: Memory) -> Shape:
    return Shape(
        memory.key,
        memory.tier,
        memory.category,
        memory.source,
        memory.summary,
        memory.content,
        memory.due_at,
        memory.status,
    )


STEPS = [0]


class HostileModel(RuleBasedStateMachine):
    emails = itertools.count()

    @initialize()
    def two_people(self) -> None:
        number = next(self.emails)
        self.people = [make_user(f"ada-{number}@example.com"), make_user(f"grace-{number}@example.com")]
        self.contexts = [ToolContext(user=person) for person in self.people]
        self.counts_before: list[tuple[int, int]] = [(0, 0), (0, 0)]
        self.protected_before: list[dict[int, Shape]] = [{}, {}]
        self.model_step = False

    def teardown(self) -> None:
        if hasattr(self, "people"):
            User.objects.filter(pk__in=[p.pk for p in self.people]).delete()

    # The model ---------------------------------------------------------------------------

    def _model(self, who: int, name: str, arguments: object) -> None:
        """A tool call for person `who`; the other person's store is watched meanwhile."""
        other = 1 - who
        other_rows = self._rows(other)
        self.counts_before[who] = self._counts(who)
        self.protected_before[who] = {m.pk: shape(m) for m in self._memories(who) if m.is_protected}
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
        result = json.loads(run_tool(self.contexts[who], name, raw))
        assert isinstance(result, dict) and "status" in result
        assert self._rows(other) == other_rows, "a tool call changed another person's memories"
        self._after_model_step(who)

    @rule(who=st.integers(0, 1), key=keys, tier=tiers, category=categories, summary=texts, content=texts, due=dates)
    def save(self, who: int, key: str, tier: str, category: str, summary: str, content: str, due: str | None) -> None:
        arguments = {
            "key": key,
            "tier": tier,
            "category": category,
            "summary": summary,
            "content": content,
            "due_at": due,
            "keep_separate": None,
        }
        self._model(who, "save_memory", arguments)

    @rule(
        who=st.integers(0, 1),
        key=keys,
        summary=st.one_of(st.none(), texts),
        content=st.one_of(st.none(), texts),
        tier=st.one_of(st.none(), tiers),
        category=st.one_of(st.none(), categories),
        due=dates,
        status=statuses,
        clear=clears,
        reason=st.one_of(words, st.just("why " * 200)),
    )
    def update(self, who: int, key: str, **fields: object) -> None:
        arguments = {"key": key, "due_at": fields.pop("due"), **fields}
        self._model(who, "update_memory", arguments)

    @precondition(lambda self: Memory.objects.exists())
    @rule(
        who=st.integers(0, 1),
        pick=st.integers(0, 100),
        summary=maybe(st.none(), sentences),
        category=maybe(st.none(), st.none(), st.sampled_from(sorted(PROTECTED_CATEGORIES)), categories),
        tier=maybe(st.none(), st.none(), st.none(), st.sampled_from(Tier.values)),
        due=maybe(st.none(), st.none(), st.none(), dates),
        status=maybe(st.none(), st.none(), st.none(), statuses),
        clear=maybe(st.none(), st.none(), st.none(), clears),
        delete=st.integers(0, 4).map(lambda n: n == 0),
    )
    def change_an_existing_memory(self, who: int, pick: int, delete: bool, **fields: object) -> None:
        """The model acting on a key it read in its index: rewrites, escalations into a
        protected category, status changes, clearing the date, deletes."""
        memories = self._memories(who)
        if not memories:
            return
        key = memories[pick % len(memories)].key
        if delete:
            self._model(who, "delete_memory", {"key": key, "reason": "no longer true"})
            return
        arguments = {"key": key, "content": None, "due_at": fields.pop("due"), "reason": "new detail", **fields}
        self._model(who, "update_memory", arguments)

    @precondition(lambda self: Memory.objects.filter(source=Source.COACH).exists())
    @rule(
        who=st.integers(0, 1),
        pick=st.integers(0, 100),
        summary=sentences,
        category=st.sampled_from(Category.values),
    )
    def rewrite_its_own_note(self, who: int, pick: int, summary: str, category: str) -> None:
        """The model rewriting a note of its own, often into a protected category: the
        escalation that once let it pile up memories nothing may forget."""
        own = [m for m in self._memories(who) if m.source == Source.COACH and not m.is_protected]
        if not own:
            return
        memory = own[pick % len(own)]
        arguments = {
            "key": memory.key,
            "summary": summary,
            "content": None,
            "tier": None,
            "category": category if memory.category != EPISODE else None,
            "due_at": None,
            "status": None,
            "clear": None,
            "reason": "it turned out to matter",
        }
        self._model(who, "update_memory", arguments)

    @rule(who=st.integers(0, 1), key=keys, reason=words)
    def delete(self, who: int, key: str, reason: str) -> None:
        self._model(who, "delete_memory", {"key": key, "reason": reason})

    @rule(who=st.integers(0, 1), query=words, limit=st.one_of(st.none(), st.integers(-5, 50)))
    def search(self, who: int, query: str, limit: int | None) -> None:
        self._model(who, "search_memories", {"query": query, "limit": limit})

    @rule(who=st.integers(0, 1), wanted=st.lists(keys, min_size=1, max_size=4) | st.lists(keys, max_size=14))
    def recall(self, who: int, wanted: list[str]) -> None:
        self._model(who, "recall_memory", {"keys": wanted})

    @rule(
        who=st.integers(0, 1),
        name=st.sampled_from(["save_memory", "update_memory", "forget_all", "delete_memory"]),
        raw=st.sampled_from(['{"key": "tea"', "[]", '{"key": 7}', '{"user": 1, "key": "tea"}', "null", ""]),
    )
    def garbage(self, who: int, name: str, raw: str) -> None:
        self._model(who, name, raw)

    @rule(who=st.integers(0, 1), category=st.sampled_from(sorted(PROTECTED_CATEGORIES)), n=st.integers(1, 4))
    def one_response_of_protected_saves(self, who: int, category: str, n: int) -> None:
        """Several saves planned in one response: the model trying to pile up what it may
        not forget (a new turn, so the per-turn write limit starts afresh)."""
        self.contexts[who] = ToolContext(user=self.people[who])
        for i in range(n):
            self.save(who, f"{category}-note-{i}", Tier.PROFILE, category, f"{category} fact {i}", "", None)

    @rule(who=st.integers(0, 1), n=st.integers(1, MAX_STORED), first=st.integers(0, 1000))
    def one_response_of_notes(self, who: int, n: int, first: int) -> None:
        """Several notes of its own saved in one response: the store fills up, and the
        oldest of the coach's notes are forgotten to make room."""
        self.contexts[who] = ToolContext(user=self.people[who])
        for i in range(first, first + n):
            self.save(who, f"note-{i}", Tier.EPISODIC, Category.HABIT, f"Habit number {i}", "", None)

    @rule(who=st.integers(0, 1), week=st.integers(1, 30))
    def weekly_episode(self, who: int, week: int) -> None:
        self.counts_before[who] = self._counts(who)
        self.protected_before[who] = {m.pk: shape(m) for m in self._memories(who) if m.is_protected}
        with contextlib.suppress(MemoryWriteError):
            weekly_episode_save(user=self.people[who], key=f"week-2026-{week:02d}", text=f"Week {week} went well.")
        self._after_model_step(who)

    # The people --------------------------------------------------------------------------

    @rule(who=st.integers(0, 1), category=categories, summary=words)
    def person_adds(self, who: int, category: str, summary: str) -> None:
        draft = MemoryDraft(key="", tier=Tier.PROFILE, category=category, summary=summary, content="")
        with contextlib.suppress(MemoryWriteError):
            memory_add_by_user(user=self.people[who], draft=draft)
        self.model_step = False

    @rule(who=st.integers(0, 1), n=st.integers(2, 6))
    def person_adds_several(self, who: int, n: int) -> None:
        for number in range(n):
            draft = MemoryDraft(key="", tier=Tier.PROFILE, category="preference", summary=f"Likes {number}", content="")
            with contextlib.suppress(MemoryWriteError):
                memory_add_by_user(user=self.people[who], draft=draft)
        self.model_step = False

    @precondition(lambda self: Memory.objects.exists())
    @rule(
        who=st.integers(0, 1),
        pick=st.integers(0, 100),
        action=st.sampled_from(["edit", "keep", "delete"]),
        category=st.one_of(st.none(), categories),
    )
    def person_changes(self, who: int, pick: int, action: str, category: str | None) -> None:
        """The person edits (into any category: a weekly episode moved out of the episodes
        counts towards the ceiling from then on), keeps or deletes one of their memories."""
        memories = self._memories(who)
        if not memories:
            return
        memory = memories[pick % len(memories)]
        user = self.people[who]
        try:
            if action == "edit":
                draft = MemoryDraft.of(memory)
                if category is not None:
                    draft = replace(draft, category=category)
                memory_edit_by_user(user=user, memory_id=memory.pk, draft=draft)
            elif action == "keep":
                memory_keep(user=user, memory_id=memory.pk)
            else:
                memory_delete(user=user, memory_id=memory.pk, actor=MemoryEvent.Actor.USER)
        except MemoryWriteError:
            pass
        self.model_step = False

    @precondition(lambda self: Memory.objects.filter(category=EPISODE).exists())
    @rule(who=st.integers(0, 1), pick=st.integers(0, 100), category=st.sampled_from(Category.values))
    def person_moves_a_weekly_episode(self, who: int, pick: int, category: str) -> None:
        """The person files a weekly summary under another category: one more memory
        towards the ceiling, in the same write that moves it."""
        episodes = [m for m in self._memories(who) if m.category == EPISODE]
        if not episodes:
            return
        memory = episodes[pick % len(episodes)]
        draft = replace(MemoryDraft.of(memory), category=category)
        with contextlib.suppress(MemoryWriteError):
            memory_edit_by_user(user=self.people[who], memory_id=memory.pk, draft=draft)
        self.model_step = False

    @precondition(lambda self: MemoryProposal.objects.exists())
    @rule(who=st.integers(0, 1), confirm=st.booleans(), twice=st.booleans())
    def person_answers(self, who: int, confirm: bool, twice: bool) -> None:
        proposal = MemoryProposal.objects.filter(user=self.people[who], status="pending").first()
        if proposal is None:
            return
        answer = proposal_confirm if confirm else proposal_reject
        for _ in range(2 if twice else 1):
            with contextlib.suppress(MemoryWriteError):
                answer(user=self.people[who], proposal_id=proposal.pk)
        self.model_step = False

    # Staff, through the admin ------------------------------------------------------------

    @rule(who=st.integers(0, 1), key=keys, category=categories, summary=sentences, pick=st.integers(0, 100))
    def staff_write(self, who: int, key: str, category: str, summary: str, pick: int) -> None:
        """Staff add or change a memory as the admin does: their own writes are held to the
        ceiling like the coach's; a protected memory's change becomes a suggestion."""
        memories = self._memories(who)
        if memories and pick % 2:
            key = memories[pick % len(memories)].key
        draft = MemoryDraft(key=key, tier=Tier.PROFILE, category=category, summary=summary, content="")
        user = self.people[who]
        try:
            memory_save(user=user, draft=draft, source=Source.ADMIN, actor=MemoryEvent.Actor.ADMIN)
        except MemoryIsProtected:
            stored = Memory.objects.keyed(user.pk, key).first()
            if stored is not None:
                with contextlib.suppress(MemoryWriteError):
                    proposal_make(
                        user=user,
                        memory=stored,
                        kind=MemoryProposal.Kind.UPDATE,
                        draft=draft,
                        reason="Our support team suggested this change.",
                        actor=MemoryEvent.Actor.ADMIN,
                    )
        except MemoryWriteError:
            pass
        self.model_step = False

    # What is checked after each step -----------------------------------------------------

    def _after_model_step(self, who: int) -> None:
        self.model_step = True
        self.last = who
        STEPS[0] += 1

    @invariant()
    def the_coach_never_takes_the_store_past_the_ceiling(self) -> None:
        if not getattr(self, "model_step", False):
            return
        notes, episodes = self._counts(self.last)
        had_notes, had_episodes = self.counts_before[self.last]
        assert notes <= max(MAX_STORED, had_notes), f"{notes} memories after a coach write (had {had_notes})"
        assert episodes <= max(MAX_EPISODES, had_episodes), f"{episodes} weekly episodes (had {had_episodes})"

    @invariant()
    def the_coach_never_rewrites_or_deletes_a_protected_memory(self) -> None:
        if not getattr(self, "model_step", False):
            return
        now = {m.pk: m for m in self._memories(self.last)}
        for pk, before in self.protected_before[self.last].items():
            assert pk in now, "a protected memory vanished on a coach step"
            assert shape(now[pk]) == before, "a protected memory changed on a coach step"

    @invariant()
    def the_store_stays_within_its_ceilings_unless_what_may_not_go_exceeds_them(self) -> None:
        for who in (0, 1):
            memories = self._memories(who)
            notes = [m for m in memories if m.category != EPISODE]
            episodes = [m for m in memories if m.category == EPISODE]
            assert len(notes) <= max(MAX_STORED, sum(m.is_protected for m in notes))
            assert len(episodes) <= max(MAX_EPISODES, sum(m.is_protected for m in episodes))
            coach_notes = [m for m in notes if m.source == Source.COACH]
            assert len(coach_notes) <= MAX_STORED, "the coach wrote more memories than the ceiling"
            assert len(notes) <= MAX_PER_PERSON, f"{len(notes)} memories, past what one person may keep"

    @invariant()
    def the_memory_block_never_exceeds_its_budget_and_keeps_safety_lines_first(self) -> None:
        for who in (0, 1):
            context = assemble_memory_context(user=self.people[who], now=timezone.now())
            assert context.tokens <= BUDGET
            forms = {item.memory_id: item.form for item in context.items if item.kind == "memory"}
            memories = self._memories(who)
            safety_left_out = any(forms[m.pk] == LEFT_OUT for m in memories if m.category in PROTECTED_CATEGORIES)
            if safety_left_out:
                assert all(forms[m.pk] == LEFT_OUT for m in memories if m.category not in PROTECTED_CATEGORIES)
            if len(memories) <= MAX_STORED + MAX_EPISODES:
                assert LEFT_OUT not in forms.values(), "within the ceiling every memory has its line"

    @invariant()
    def a_persons_source_is_set_only_by_the_person(self) -> None:
        for who in (0, 1):
            for memory in self._memories(who):
                if memory.source in USER_SOURCES:
                    assert MemoryEvent.objects.filter(
                        user=self.people[who], memory_id=memory.pk, actor=MemoryEvent.Actor.USER
                    ).exists(), "a memory carries the person's source without any act of theirs"

    @invariant()
    def every_change_has_its_event(self) -> None:
        for who in (0, 1):
            events = list(MemoryEvent.objects.filter(user=self.people[who]).order_by("created_at", "pk"))
            stored = {m.pk: m for m in self._memories(who)}
            by_memory: dict[int, list[MemoryEvent]] = {}
            for event in events:
                by_memory.setdefault(event.memory_id, []).append(event)
            for pk, memory in stored.items():
                history = by_memory.get(pk, [])
                births = [i for i, e in enumerate(history) if e.action in BIRTHS]
                assert births, "a memory with no event of its creation"
                changes = [e for e in history[births[-1] :] if e.action in CHANGES]
                assert len(changes) == memory.version, f"version {memory.version}, {len(changes)} changes recorded"
            for pk, history in by_memory.items():
                if pk not in stored and pk is not None:
                    assert history[-1].action in GONE, "a memory vanished without an event saying so"

    @invariant()
    def what_the_person_deleted_leaves_no_text_in_the_history(self) -> None:
        for who in (0, 1):
            deleted = MemoryEvent.objects.filter(user=self.people[who], actor="user", action="deleted")
            for memory_id in deleted.values_list("memory_id", flat=True):
                for event in MemoryEvent.objects.filter(user=self.people[who], memory_id=memory_id):
                    if Memory.objects.filter(pk=memory_id).exists():
                        continue
                    assert (event.key, event.before, event.after, event.reason) == (None, None, None, "")

    # Reading the store ---------------------------------------------------------------------

    def _memories(self, who: int) -> list[Memory]:
        return list(Memory.objects.filter(user=self.people[who]).order_by("pk"))

    def _counts(self, who: int) -> tuple[int, int]:
        memories = self._memories(who)
        episodes = sum(1 for m in memories if m.category == EPISODE)
        return len(memories) - episodes, episodes

    def _rows(self, who: int) -> list[tuple[int, int, str]]:
        return [(m.pk, m.version, m.key) for m in self._memories(who)]


def test_the_memory_keeps_its_promises_whatever_the_model_sends(settings_override: None) -> None:
    STEPS[0] = 0
    run_state_machine_as_test(
        HostileModel,
        settings=settings(
            max_examples=20,
            stateful_step_count=50,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    # Enough of the model's moves for the promises to mean something.
    assert STEPS[0] >= 300, STEPS[0]


@pytest.fixture
def settings_override(settings) -> None:
    settings.MEMORY_MAX_STORED = MAX_STORED
    settings.MEMORY_MAX_EPISODES = MAX_EPISODES
    settings.MEMORY_MAX_PER_PERSON = MAX_PER_PERSON
    settings.MEMORY_CONTEXT_BUDGET_TOKENS = BUDGET
    settings.MEMORY_MAX_WRITES_PER_TURN = 1000
    assert django_settings.MEMORY_MAX_STORED == MAX_STORED


def test_the_state_machine_budget_holds_a_full_index() -> None:
    from memory.context import fixed_tokens_at_most, index_line_tokens_at_most

    assert fixed_tokens_at_most() + (MAX_STORED + MAX_EPISODES) * index_line_tokens_at_most() <= BUDGET
