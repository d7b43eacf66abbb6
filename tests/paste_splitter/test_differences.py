"""When a fact says otherwise than another about the same thing, read as its rules: another
month, other days or another time for a thing both name; another job; another home. Facts
that may both be true say nothing otherwise. Pure: no app, no database."""

from __future__ import annotations

import pytest

from paste_splitter import says_otherwise


@pytest.mark.parametrize(
    ("fact", "kept", "what"),
    [
        ("You're going on a climbing trip to Kalymnos in June", "Climbing trip to Kalymnos in May", "the month"),
        ("Your talk at the library is in Sept.", "You give a talk at the library in October", "the month"),
        ("You rehearse on Wednesday evenings", "You rehearse on Tuesday and Thursday evenings", "the days"),
        ("You start work at 9am", "You're a pharmacist and you start work at 7am", "the time"),
        ("You teach chemistry now", "You're a pharmacist", "your work"),
        ("You work as a nurse", "You're retired", "your work"),
        ("You live in York", "You live in Leeds with your partner and two kids", "where you live"),
    ],
)
def test_a_fact_that_says_otherwise_about_the_same_thing_says_what(fact: str, kept: str, what: str) -> None:
    assert says_otherwise(fact, kept) == what
    assert says_otherwise(kept, fact) == what


@pytest.mark.parametrize(
    ("fact", "kept"),
    [
        pytest.param("You're allergic to cashews", "You're allergic to peanuts", id="two allergies"),
        pytest.param("You swim on Fridays", "You run on Tuesdays", id="two activities on two days"),
        pytest.param("You're a pharmacist", "You work at the pharmacy", id="one job, two ways"),
        pytest.param("You may want to rest on Sundays", "Trip to Kalymnos in May", id="may, not May"),
        pytest.param("Half marathon in April", "You read one book a month", id="nothing in common"),
        pytest.param("You're a nurse on nights", "Your name is Ada and you work as a nurse", id="the same job"),
        pytest.param("Trip to Kalymnos in May", "Trip to Kalymnos in May", id="the same fact"),
    ],
)
def test_facts_that_may_both_be_so_say_nothing_otherwise(fact: str, kept: str) -> None:
    assert says_otherwise(fact, kept) is None
