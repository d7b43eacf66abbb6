"""The claim on a message's turn: one turn answers it, whatever races for the claim (two
tabs, two web processes, a reload), and nobody claims another person's message."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection
from django.utils import timezone

from accounts.models import User
from coach import services
from coach.models import Message
from coach.services import message_post, session_start, turn_begin

pytestmark = pytest.mark.django_db(transaction=True)


def sessions_waiting_on_a_lock() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        return cursor.fetchone()[0]


def test_two_turns_claiming_one_message_at_the_same_moment_leave_one_to_answer_it(
    user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    message = message_post(session=session_start(user=user), text="Plan my week", client_id=None)
    inside, release = threading.Event(), threading.Event()
    assemble = services.conversation_for_turn

    def held_open(**kwargs: object) -> object:
        # The first claim's transaction stays open while the second one's claim arrives.
        inside.set()
        release.wait(10)
        return assemble(**kwargs)

    monkeypatch.setattr(services, "conversation_for_turn", held_open)
    begun: list[object] = []

    def begin() -> None:
        try:
            begun.append(turn_begin(user_id=user.pk, message_id=message.pk, now=timezone.now()))
        finally:
            connection.close()

    first = threading.Thread(target=begin)
    first.start()
    assert inside.wait(10)
    second = threading.Thread(target=begin)
    second.start()
    # The second claim is waiting on the row the first one holds: the race is on.
    deadline = time.monotonic() + 10
    while sessions_waiting_on_a_lock() == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sessions_waiting_on_a_lock() == 1
    release.set()
    first.join(10)
    second.join(10)

    assert len(begun) == 2
    assert sum(result is not None for result in begun) == 1
    assert Message.objects.get(pk=message.pk).status == Message.Status.ANSWERING


def test_a_turn_never_claims_another_persons_message(user: User, other_user: User) -> None:
    message = message_post(session=session_start(user=user), text="Plan my week", client_id=None)

    assert turn_begin(user_id=other_user.pk, message_id=message.pk, now=timezone.now()) is None
    assert Message.objects.get(pk=message.pk).status == Message.Status.PENDING
