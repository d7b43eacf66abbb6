"""One person's memory writes, one at a time, and none by the coach while memory is off."""

from __future__ import annotations

import threading

import pytest
from django.db import transaction

from accounts.models import User
from memory.drafts import MemoryOff
from memory.store import lock_user
from tests.coach.races import race

pytestmark = pytest.mark.django_db


def test_a_coach_write_is_refused_while_memory_is_off_and_the_persons_own_is_not(user: User) -> None:
    User.objects.filter(pk=user.pk).update(memory_enabled=False)

    with pytest.raises(MemoryOff), transaction.atomic():
        lock_user(user, actor="coach")
    with transaction.atomic():
        lock_user(user, actor="user")


@pytest.mark.django_db(transaction=True)
def test_a_second_memory_write_of_the_same_person_waits_for_the_first(user: User) -> None:
    holding, release = threading.Event(), threading.Event()

    def first() -> None:
        with transaction.atomic():
            lock_user(user, actor="coach")
            holding.set()
            release.wait(10)

    def second() -> None:
        with transaction.atomic():
            lock_user(user, actor="coach")

    # race() fails unless PostgreSQL shows the second waiting on the first's lock.
    race(first, second, holding=holding, release=release)
