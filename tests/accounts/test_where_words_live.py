"""The written list of where a person's words live (accounts/where_words_live.py) stays the
whole list: every column of the database that could hold words is on it, or reviewed as
holding none; every way to forget reaches somewhere and is tested through the search of
every place (tests/forgetting.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from accounts.where_words_live import COLUMNS, NO_WORDS, PLACES, Way, places_reached_by
from tests.forgetting import database_columns

pytestmark = pytest.mark.django_db


def test_every_column_that_could_hold_words_is_on_the_list_or_reviewed_as_holding_none() -> None:
    listed = {place.name for place in COLUMNS}
    in_the_database = database_columns()

    assert not listed & set(NO_WORDS), "a column is on both lists"
    assert in_the_database - listed - set(NO_WORDS) == set(), "put these on the list, or in NO_WORDS with why"
    assert (listed | set(NO_WORDS)) - in_the_database == set(), "these are on the list but not in the database"


def test_every_place_says_what_it_holds_and_is_reached_by_some_way() -> None:
    names = [place.name for place in PLACES]

    assert len(names) == len(set(names))
    for place in PLACES:
        assert place.holds and place.reached_by, place.name


def test_every_way_to_forget_reaches_a_place_and_is_tested_through_the_search_of_every_place() -> None:
    tests = (Path(__file__).parent / "test_forgetting.py").read_text()

    for way in Way:
        assert places_reached_by(way), way
        assert f"way=Way.{way.name}" in tests, f"no test looks everywhere after {way.name}"
