"""The eviction policy, read as the policy. No database: the module is pure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from memory.policy import (
    PROTECTED_CATEGORIES,
    USER_SOURCES,
    MemoryFacts,
    coach_write_refusal,
    forgetting_order,
    is_protected,
    person_write_refusal,
    plan_eviction,
    protection_reason,
)

MAX_STORED = 60
MAX_EPISODES = 14
MAX_PER_PERSON = 500
START = datetime(2026, 1, 1, tzinfo=UTC)
SOURCES = ["user", "manual", "onboarding", "coach"]
CATEGORIES = [*sorted(PROTECTED_CATEGORIES), "background", "preference", "goal", "habit", "episode", "other"]


TIERS = ["profile", "episodic", "prospective"]


def note(
    ref: str, *, minutes: int, source: str = "coach", category: str = "habit", tier: str = "episodic"
) -> MemoryFacts:
    return MemoryFacts(
        ref=ref, source=source, category=category, tier=tier, updated_at=START + timedelta(minutes=minutes)
    )


def plan(memories: list[MemoryFacts]) -> list[str | int]:
    return [e.ref for e in plan_eviction(memories, max_stored=MAX_STORED, max_episodes=MAX_EPISODES)]


def remaining(memories: list[MemoryFacts]) -> list[MemoryFacts]:
    gone = set(plan(memories))
    return [m for m in memories if m.ref not in gone]


def refusal(before: list[MemoryFacts], after: list[MemoryFacts]) -> str | None:
    """Rule 4 for a coach write of the last memory of `after`."""
    return coach_write_refusal(before, after, written=after[-1].ref, max_stored=MAX_STORED, max_episodes=MAX_EPISODES)


stores = st.lists(
    st.builds(
        MemoryFacts,
        ref=st.just(""),
        source=st.sampled_from(SOURCES),
        category=st.sampled_from(CATEGORIES),
        tier=st.sampled_from(TIERS),
        updated_at=st.integers(0, 10_000).map(lambda minutes: START + timedelta(minutes=minutes)),
    ),
    max_size=160,
).map(lambda ms: [MemoryFacts(f"m{i:03d}", m.source, m.category, m.tier, m.updated_at) for i, m in enumerate(ms)])


def test_typed_injury_survives_any_number_of_coach_notes() -> None:
    shoulder = note("left-shoulder", minutes=0, source="user", category="injury")
    oats = [note(f"oats-{i}", minutes=i + 1) for i in range(200)]

    assert "left-shoulder" not in plan([shoulder, *oats])


def test_an_allergy_the_coach_wrote_is_never_evicted() -> None:
    allergy = note("allergy-nuts", minutes=0, source="coach", category="allergy")

    assert "allergy-nuts" not in plan([allergy, *[note(f"n{i}", minutes=i + 1) for i in range(100)]])


def test_protection_is_a_union_of_source_and_category() -> None:
    assert is_protected(note("a", minutes=0, source="user", category="habit"))
    assert is_protected(note("b", minutes=0, source="coach", category="medical"))
    assert not is_protected(note("c", minutes=0, source="coach", category="habit"))


def test_protected_memories_alone_may_exceed_the_ceiling() -> None:
    typed = [note(f"typed-{i}", minutes=i, source="user") for i in range(70)]
    coach = [note(f"coach-{i}", minutes=100 + i) for i in range(5)]

    assert sorted(plan(typed + coach)) == sorted(m.ref for m in coach)


def test_the_oldest_unprotected_goes_first() -> None:
    memories = [note(f"n{i}", minutes=i) for i in range(62)]

    assert plan(memories) == ["n0", "n1"]


def test_episodes_keep_the_newest_fourteen_beside_the_ceiling() -> None:
    episodes = [note(f"week-{i}", minutes=i, category="episode") for i in range(16)]
    others = [note(f"n{i}", minutes=100 + i) for i in range(60)]

    assert plan(episodes + others) == ["week-0", "week-1"]


def test_each_eviction_says_why() -> None:
    evictions = plan_eviction([note(f"n{i}", minutes=i) for i in range(61)], max_stored=60, max_episodes=14)

    assert evictions[0].reason == "the oldest of the coach's session notes, when more than 60 memories were kept"


def test_ties_in_age_are_broken_by_key_so_the_plan_is_stable() -> None:
    memories = [note(key, minutes=0) for key in ("c", "a", "b")]

    assert [e.ref for e in plan_eviction(memories, max_stored=1, max_episodes=14)] == ["a", "b"]


def test_protection_reason_speaks_plainly() -> None:
    assert protection_reason(note("a", minutes=0, source="user")) == "you wrote it"
    assert protection_reason(note("b", minutes=0, source="coach", category="allergy")) == "it is about your allergy"
    assert protection_reason(note("c", minutes=0)) is None


def test_forgetting_order_lists_unprotected_memories_oldest_first() -> None:
    memories = [
        note("new", minutes=5),
        note("typed", minutes=0, source="user"),
        note("old", minutes=1),
        note("ep", minutes=0, category="episode"),
    ]

    assert [m.ref for m in forgetting_order(memories)] == ["old", "new"]


@given(stores)
def test_nothing_protected_is_ever_evicted(memories: list[MemoryFacts]) -> None:
    by_ref = {m.ref: m for m in memories}

    assert not any(is_protected(by_ref[ref]) for ref in plan(memories))


@given(stores)
def test_the_store_ends_at_or_under_the_ceiling_when_unprotected_memories_allow(memories: list[MemoryFacts]) -> None:
    kept = [m for m in remaining(memories) if m.category != "episode"]
    protected = [m for m in memories if m.category != "episode" and is_protected(m)]

    assert len(kept) <= max(MAX_STORED, len(protected))


@given(stores)
def test_at_most_fourteen_episodes_remain_unless_protected_ones_exceed_it(memories: list[MemoryFacts]) -> None:
    episodes = [m for m in remaining(memories) if m.category == "episode"]
    protected_episodes = [m for m in memories if m.category == "episode" and is_protected(m)]

    assert len(episodes) <= max(MAX_EPISODES, len(protected_episodes))


@given(stores)
def test_what_goes_is_always_older_than_any_unprotected_memory_of_its_tier_that_stays(
    memories: list[MemoryFacts],
) -> None:
    gone = set(plan(memories))
    for is_episode in (True, False):
        for tier in TIERS:
            group = [
                m
                for m in memories
                if (m.category == "episode") == is_episode and m.tier == tier and not is_protected(m)
            ]
            evicted = [(m.updated_at, m.ref) for m in group if m.ref in gone]
            kept = [(m.updated_at, m.ref) for m in group if m.ref not in gone]
            if evicted and kept:
                assert max(evicted) < min(kept)


@given(stores)
def test_a_profile_note_goes_only_once_no_session_note_or_intention_is_left(memories: list[MemoryFacts]) -> None:
    gone = set(plan(memories))
    others = [m for m in memories if m.category != "episode" and not is_protected(m)]
    if any(m.ref in gone for m in others if m.tier == "profile"):
        assert all(m.ref in gone for m in others if m.tier != "profile")
    if any(m.ref in gone for m in others if m.tier == "prospective"):
        assert all(m.ref in gone for m in others if m.tier == "episodic")


@given(stores)
def test_nothing_is_evicted_needlessly(memories: list[MemoryFacts]) -> None:
    others = [m for m in memories if m.category != "episode"]
    episodes = [m for m in memories if m.category == "episode"]
    evicted = plan(memories)

    assert len(evicted) == max(0, min(len(others) - MAX_STORED, sum(not is_protected(m) for m in others))) + max(
        0, min(len(episodes) - MAX_EPISODES, sum(not is_protected(m) for m in episodes))
    )


@given(stores, st.randoms())
def test_the_plan_is_deterministic_whatever_the_input_order(memories: list[MemoryFacts], rng) -> None:
    shuffled = list(memories)
    rng.shuffle(shuffled)

    assert plan(shuffled) == plan(memories)


def test_user_sources_are_the_three_channels_a_person_writes_through() -> None:
    assert frozenset({"user", "manual", "onboarding"}) == USER_SOURCES


# Rule 4: the coach never takes the store past the ceiling -----------------------------


def test_a_coach_write_at_the_ceiling_with_nothing_to_forget_is_refused() -> None:
    safety = [note(f"safety-{i}", minutes=i, category="medical") for i in range(MAX_STORED)]
    another = note("another", minutes=100, category="allergy")

    assert "ceiling of 60 memories" in (refusal(safety, [*safety, another]) or "")


def test_a_coach_write_at_the_ceiling_is_allowed_when_an_old_note_can_go() -> None:
    store = [note(f"n{i}", minutes=i) for i in range(MAX_STORED)]

    assert refusal(store, [*store, note("new", minutes=100, category="allergy")]) is None


def test_escalating_a_coach_note_into_a_protected_category_counts_toward_the_ceiling() -> None:
    # Sixty protected coach notes and one ordinary one: moving the last into `medical`
    # leaves 61 that may never go.
    store = [note(f"s{i}", minutes=i, category="medical") for i in range(MAX_STORED - 1)]
    tea = note("likes-tea", minutes=99, category="preference")
    escalated = note("likes-tea", minutes=100, category="medical")
    new = note("new", minutes=101)

    assert refusal([*store, tea], [*store, escalated]) is None
    assert refusal([*store, escalated], [*store, escalated, new]) is not None
    assert refusal([*store, escalated], [*store, escalated, note("another", minutes=102, category="injury")])


def test_when_the_person_is_past_the_ceiling_the_coach_may_not_add_to_it() -> None:
    typed = [note(f"typed-{i}", minutes=i, source="user") for i in range(70)]

    assert refusal(typed, [*typed, note("new", minutes=100)]) is not None
    assert refusal(typed, [*typed, note("new", minutes=100, category="injury")]) is not None


def test_a_coach_episode_beyond_fourteen_protected_episodes_is_refused() -> None:
    kept = [note(f"week-{i}", minutes=i, category="episode", source="manual") for i in range(MAX_EPISODES)]

    assert refusal(kept, [*kept, note("week-new", minutes=100, category="episode")]) is not None


@given(stores, st.sampled_from(CATEGORIES), st.sampled_from(TIERS))
def test_an_allowed_coach_write_never_leaves_more_than_the_ceiling_or_than_before(
    memories: list[MemoryFacts], category: str, tier: str
) -> None:
    before = remaining(memories)
    after = [*before, note("new", minutes=20_000, category=category, tier=tier)]

    if refusal(before, after) is None:
        kept = remaining(after)
        assert "new" in {m.ref for m in kept}
        for is_episode, ceiling in ((False, MAX_STORED), (True, MAX_EPISODES)):
            now = [m for m in kept if (m.category == "episode") is is_episode]
            had = [m for m in before if (m.category == "episode") is is_episode]
            assert len(now) <= max(ceiling, len(had))


# Rule 5: the person may pass the ceiling, up to what one person may keep ------------------


def person_refusal(before: list[MemoryFacts], after: list[MemoryFacts]) -> str | None:
    return person_write_refusal(
        before, after, max_stored=MAX_STORED, max_episodes=MAX_EPISODES, max_per_person=MAX_PER_PERSON
    )


def test_the_persons_own_writes_pass_the_ceiling_up_to_what_one_person_may_keep() -> None:
    typed = [note(f"typed-{i}", minutes=i, source="user") for i in range(MAX_PER_PERSON - 1)]
    last = note("last", minutes=1000, source="user")
    one_more = note("one-more", minutes=1001, source="user")

    assert person_refusal(typed, [*typed, last]) is None
    assert "500 memories" in (person_refusal([*typed, last], [*typed, last, one_more]) or "")


def test_the_coachs_notes_make_room_before_the_persons_write_is_refused() -> None:
    typed = [note(f"typed-{i}", minutes=i, source="user") for i in range(MAX_PER_PERSON - 1)]
    coach = [note(f"coach-{i}", minutes=i) for i in range(5)]
    new = note("new", minutes=1000, source="user")

    # Five notes of the coach's go for it: it is the 500th kept.
    assert person_refusal([*typed, *coach], [*typed, *coach, new]) is None


def test_a_change_that_adds_nothing_is_never_refused_however_full() -> None:
    typed = [note(f"typed-{i}", minutes=i, source="user") for i in range(MAX_PER_PERSON + 20)]
    edited = note("typed-3", minutes=2000, source="manual")

    assert person_refusal(typed, [m for m in typed if m.ref != "typed-3"] + [edited]) is None


def test_weekly_episodes_are_not_counted_against_what_a_person_keeps() -> None:
    typed = [note(f"typed-{i}", minutes=i, source="user") for i in range(MAX_PER_PERSON)]
    week = note("week", minutes=1000, category="episode", source="manual")

    assert person_refusal(typed, [*typed, week]) is None
