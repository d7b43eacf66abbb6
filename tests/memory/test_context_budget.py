"""The memory block never exceeds its budget, at any store size, and what the person
must never lose from it (their safety) goes last, if ever."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from accounts.models import User
from infra.tokens import estimate_tokens
from memory.context import LEFT_OUT, LINE, WHOLE, assemble_memory_context
from memory.models import SUMMARY_MAX_CHARS, Memory
from memory.policy import PROTECTED_CATEGORIES
from tests.conftest import make_user
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db

SAFETY = sorted(PROTECTED_CATEGORIES)


def forms(context) -> dict[int, str]:
    return {item.memory_id: item.form for item in context.items if item.kind == "memory"}


def test_sixty_protected_coach_notes_of_the_longest_kind_fit_the_budget_as_an_index(user: User) -> None:
    start = timezone.now() - timedelta(days=60)
    for n in range(60):
        make_memory(
            user,
            f"{SAFETY[n % len(SAFETY)]}-{n + 1}",
            category=SAFETY[n % len(SAFETY)],
            tier="profile",
            summary=("S" * (SUMMARY_MAX_CHARS - 4)) + f"{n:04d}",
            content="C" * settings.MEMORY_CONTENT_MAX_CHARS,
            updated_at=start + timedelta(hours=n),
        )

    context = assemble_memory_context(user=user, now=timezone.now())

    assert context.tokens <= settings.MEMORY_CONTEXT_BUDGET_TOKENS == context.budget
    assert estimate_tokens(context.text) == context.tokens
    shown = forms(context)
    assert LEFT_OUT not in shown.values() and len(shown) == 60
    whole = [pk for pk, form in shown.items() if form == WHOLE]
    assert whole, "the budget left after the index holds some notes in full"
    newest = sorted(Memory.objects.filter(user=user), key=lambda m: m.updated_at, reverse=True)
    assert set(whole) == {m.pk for m in newest[: len(whole)]}, "safety notes go in whole newest first"


def test_a_person_who_wrote_300_memories_keeps_every_safety_line_and_loses_the_oldest_others(user: User) -> None:
    start = timezone.now() - timedelta(days=300)
    for n in range(300):
        safety = n % 10 == 0
        make_memory(
            user,
            f"{'allergy' if safety else 'preference'}-{n + 1}",
            source="user",
            category="allergy" if safety else "preference",
            tier="profile",
            summary=f"{'Allergic to food number' if safety else 'Likes thing number'} {n}, " + "detail " * 12,
            updated_at=start + timedelta(hours=n),
        )

    context = assemble_memory_context(user=user, now=timezone.now())

    assert context.tokens <= settings.MEMORY_CONTEXT_BUDGET_TOKENS
    memories = {m.pk: m for m in Memory.objects.filter(user=user)}
    shown = forms(context)
    assert all(shown[pk] != LEFT_OUT for pk, m in memories.items() if m.category == "allergy")
    left_out = [memories[pk] for pk, form in shown.items() if form == LEFT_OUT]
    kept_others = [
        memories[pk] for pk, form in shown.items() if form != LEFT_OUT and memories[pk].category != "allergy"
    ]
    assert left_out and kept_others
    assert max(m.updated_at for m in left_out) < min(m.updated_at for m in kept_others)
    assert {item.label for item in context.dropped} == {m.summary for m in left_out}


def test_a_full_text_replaces_its_line_and_is_never_both(user: User) -> None:
    memory = make_memory(user, "injury-1", category="injury", summary="Bad left knee", content="No lunges, no jumps.")

    text = assemble_memory_context(user=user, now=timezone.now()).text

    assert text.count("Bad left knee") == 1
    # The line, with the note indented beneath it: one entry, not a line and a note apart.
    assert text.count("- injury-1 (") == 1
    assert f"- injury-1 ({memory.updated_at.day} {memory.updated_at:%b}): Bad left knee\n  No lunges, no jumps." in text


@given(
    sizes=st.lists(
        st.tuples(
            st.sampled_from(["injury", "allergy", "habit", "goal", "episode", "preference"]),
            st.sampled_from(["user", "coach"]),
            st.integers(1, 150),
            st.integers(0, 2000),
        ),
        max_size=90,
    ),
    budget=st.integers(1200, 9000),
)
@hypothesis_settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_block_never_exceeds_any_budget_that_holds_the_fixed_parts(sizes, budget: int) -> None:
    person = make_user(f"budget-{len(sizes)}-{budget}@example.com")
    try:
        for n, (category, source, summary_chars, content_chars) in enumerate(sizes):
            make_memory(
                person,
                f"note-{n}",
                category=category,
                source=source,
                summary=("s" * summary_chars),
                content=("c" * content_chars) or None,
            )

        context = assemble_memory_context(user=person, now=timezone.now(), budget_tokens=budget)

        assert context.tokens <= budget
        shown = forms(context)
        categories = {m.pk: m.category for m in Memory.objects.filter(user=person)}
        if any(shown[pk] == LEFT_OUT for pk, c in categories.items() if c in PROTECTED_CATEGORIES):
            assert all(shown[pk] == LEFT_OUT for pk, c in categories.items() if c not in PROTECTED_CATEGORIES)
        assert set(shown.values()) <= {WHOLE, LINE, LEFT_OUT}
    finally:
        person.delete()
