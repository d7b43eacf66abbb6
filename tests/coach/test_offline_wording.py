"""How the offline coach says a remembered note back, and which notes a reply uses.

Pure functions of the coach, no server: the walk (test_demo_walk) shows them in the app.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offline_coach.listening import brought_up
from offline_coach.phrasing import join_words
from offline_coach.prompt import Remembered
from offline_coach.wording import PASTED, clause, each_clause

KNEE = Remembered(key="injury-1", summary="Bad left knee", category="injury", tier="profile")
ONBOARDING = Remembered(
    key="allergy-1",
    summary="Allergic to peanuts. I had a stress fracture in my right shin in 2023.",
    category="allergy",
    source="the person",
)
SHIFTS = Remembered(key="schedule", summary="Works night shifts", category="schedule")
RACE = Remembered(key="half-marathon-april", summary="Training for a half marathon in April", category="project")
TALK = Remembered(key="talk-june", summary="Giving a talk in June", category="project")
STYLE = Remembered(key="coaching-style", summary="Wants short, to-the-point answers", category="feedback")
EVERYTHING = [KNEE, ONBOARDING, SHIFTS, RACE, TALK, STYLE]


def note(summary: str, category: str = "other") -> Remembered:
    return Remembered(key="note", summary=summary, category=category)


# Rewording ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("summary", "said"),
    [
        ("I had a stress fracture in my right shin in 2023.", "you had a stress fracture in your right shin in 2023"),
        ("My talk is in June", "your talk is in June"),
        ("Works night shifts", "you work night shifts"),
        ("Giving a talk in June", "you're giving a talk in June"),
        ("Allergic to peanuts", "you're allergic to peanuts"),
        ("Bad left knee", "you have a bad left knee"),
        ("Bad left shoulder: no overhead pressing", "you have a bad left shoulder, which rules out overhead pressing"),
        ("They sleep during the day", "you sleep during the day"),
        ("No downhill running", "downhill running is out"),
    ],
)
def test_a_note_is_reworded_to_the_person_without_its_full_stop(summary: str, said: str) -> None:
    assert clause(note(summary)) == said


def test_text_no_rule_rewords_is_not_pasted_into_a_sentence() -> None:
    assert clause(note("Talk in July now")) is None


def test_a_note_of_two_facts_gives_the_one_the_message_is_about() -> None:
    assert clause(ONBOARDING, about="Can you plan my training week?") == (
        "you had a stress fracture in your right shin in 2023"
    )
    assert clause(ONBOARDING, about="What should I eat tonight?") == "you're allergic to peanuts"
    assert each_clause(ONBOARDING) == [
        "you're allergic to peanuts",
        "you had a stress fracture in your right shin in 2023",
    ]


PIECES = """
    I my me you your they their am is had have bad left knee allergic to peanuts . , : no running
    works night shifts in June 2023 training Giving a talk
"""
WORDS = st.sampled_from(PIECES.split())


@given(st.lists(WORDS, min_size=1, max_size=12).map(" ".join))
def test_whatever_a_note_says_a_reworded_clause_never_reads_pasted(summary: str) -> None:
    reworded = clause(note(summary))
    assert reworded is None or not PASTED.search(reworded)


# Which notes a reply brings up -----------------------------------------------------------


def keys(items: list[Remembered]) -> list[str]:
    return [item.key for item in items]


def test_food_brings_up_the_allergy_and_not_the_knee() -> None:
    assert keys(brought_up("What should I eat the night before a long run?", found=[], known=EVERYTHING)) == [
        "allergy-1"
    ]


def test_training_brings_up_the_injury_then_what_shares_its_words_then_its_schedule() -> None:
    used = keys(brought_up("Can you plan my training week?", found=[RACE, TALK], known=EVERYTHING))

    assert used == ["injury-1", "half-marathon-april", "schedule"]


def test_a_limit_on_training_comes_up_for_training_and_not_for_food() -> None:
    downhill = Remembered(key="constraint-1", summary="No downhill running", category="constraint")

    assert brought_up("Plan my long run", found=[], known=[downhill]) == [downhill]
    assert brought_up("What should I eat tonight?", found=[], known=[downhill]) == []


def test_sleep_brings_up_the_night_shifts() -> None:
    assert keys(brought_up("I keep sleeping badly. Any advice?", found=[], known=EVERYTHING)) == ["schedule"]


def test_a_message_that_touches_nothing_brings_up_nothing_and_style_never_comes_up() -> None:
    assert brought_up("I had coffee.", found=[STYLE], known=EVERYTHING) == []
    assert brought_up("Keep your answers short, please", found=[STYLE], known=[STYLE]) == []


def test_what_a_reply_brought_up_comes_again_only_when_asked_about_or_it_keeps_them_safe() -> None:
    earlier = ["You told me you're training for a half marathon in April. And you have a bad left knee."]

    told = brought_up("I bought new shoes for training.", found=[RACE], known=[KNEE, RACE], earlier=earlier)
    asked = brought_up("How is my training going?", found=[RACE], known=[KNEE, RACE], earlier=earlier)

    assert told == []
    assert keys(asked) == ["injury-1", "half-marathon-april"]


def test_at_most_three_are_brought_up() -> None:
    injuries = [Remembered(key=f"injury-{n}", summary=f"Sore knee number {n}", category="injury") for n in range(5)]

    assert len(brought_up("Plan my training", found=[], known=injuries)) == 3


def test_a_list_names_each_thing_once() -> None:
    assert join_words(["shellfish", "shellfish", "shellfish"]) == "shellfish"
    assert join_words(["shellfish", "peanuts", "shellfish"]) == "shellfish and peanuts"
