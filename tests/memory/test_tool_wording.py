"""What the tools accept and say back, as a smaller model would need it plainly: a month
with no day, the key to use after a protected memory is renamed, and what a key that
names nothing may have meant."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from accounts.models import User
from memory.context import assemble_memory_context
from tests.memory.factories import make_memory, memory_named
from tests.memory.test_tools import call, save

pytestmark = pytest.mark.django_db

TRIP = {"tier": "prospective", "category": "goal"}


def test_a_month_with_no_day_is_kept_and_said_as_the_month(user: User) -> None:
    year = timezone.now().year + 1
    result = save(user, "trip", "You're climbing on Kalymnos", due_at=f"{year}-05", **TRIP)

    assert result["status"] == "saved"
    trip = memory_named(user, "trip")
    assert trip.due_month_only
    assert trip.due_at == datetime(year, 5, 1, 9, tzinfo=ZoneInfo(user.time_zone))
    text = assemble_memory_context(user=user, now=timezone.now()).text
    assert f"You're climbing on Kalymnos (due May {year}" in text and f"1 May {year}" not in text
    [recalled] = call(user, "recall_memory", keys=["trip"])["memories"]
    assert recalled["due"] == f"{year}-05"


def test_this_month_is_not_in_the_past_until_it_is_over(user: User) -> None:
    now = timezone.now().astimezone(ZoneInfo(user.time_zone))

    result = save(user, "trip", "You're away this month", due_at=f"{now:%Y-%m}", **TRIP)

    assert result["status"] == "saved", result


def test_a_day_given_later_replaces_the_month(user: User) -> None:
    year = timezone.now().year + 1
    save(user, "trip", "You're climbing on Kalymnos", due_at=f"{year}-05", **TRIP)

    result = call(
        user,
        "update_memory",
        key="trip",
        summary=None,
        content=None,
        tier=None,
        category=None,
        due_at=f"{year}-06-12",
        status=None,
        clear=None,
        reason="The trip is on 12 June now",
    )

    assert result["status"] == "updated"
    trip = memory_named(user, "trip")
    assert not trip.due_month_only and trip.due_at.day == 12


def test_a_protected_save_says_plainly_which_key_to_use_from_now_on(user: User) -> None:
    result = save(user, "shellfish-allergy", "You're allergic to shellfish", tier="profile", category="allergy")

    assert result["key"] == "allergy-1"
    assert "use 'allergy-1' from now on" in result["note"]


def test_a_key_that_names_nothing_is_answered_with_the_neutral_keys_it_may_have_meant(user: User) -> None:
    make_memory(user, "allergy-1", source="user", category="allergy", summary="You're allergic to shellfish")
    make_memory(user, "oats", summary="Oats every morning")

    result = call(user, "delete_memory", key="shellfish-allergy", reason="You outgrew it")

    assert result["status"] == "error"
    assert "there is no memory 'shellfish-allergy'; nothing was deleted" in result["error"]
    assert "allergy-1: You're allergic to shellfish" in result["error"] and "oats" not in result["error"]
