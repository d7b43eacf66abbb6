"""The claim on a message's turn: one turn answers it, whatever races for the claim (two
tabs, two web processes, a reload), and nobody claims another person's message."""

from __future__ import annotations

import threading

import pytest
from django.utils import timezone

from accounts.models import User
from coach import claims
from coach.claims import turn_begin
from coach.models import Message
from coach.services import message_post, session_start
from tests.coach.races import race

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_turns_claiming_one_message_at_the_same_moment_leave_one_to_answer_it(
    user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    message = message_post(session=session_start(user=user), text="Plan my week", client_id=None)
    inside, release = threading.Event(), threading.Event()
    assemble = claims.conversation_for_turn

    def held_open(**kwargs: object) -> object:
        # The first claim's transaction stays open while the second one's claim arrives.
        inside.set()
        release.wait(10)
        return assemble(**kwargs)

    monkeypatch.setattr(claims, "conversation_for_turn", held_open)
    begun: list[object] = []

    def begin() -> None:
        begun.append(turn_begin(user_id=user.pk, message_id=message.pk, now=timezone.now()))

    # The second claim arrives while the first one's transaction holds the message.
    race(begin, begin, holding=inside, release=release)

    assert len(begun) == 2
    assert sum(result is not None for result in begun) == 1
    assert Message.objects.get(pk=message.pk).status == Message.Status.ANSWERING


def test_a_turn_never_claims_another_persons_message(user: User, other_user: User) -> None:
    message = message_post(session=session_start(user=user), text="Plan my week", client_id=None)

    assert turn_begin(user_id=other_user.pk, message_id=message.pk, now=timezone.now()) is None
    assert Message.objects.get(pk=message.pk).status == Message.Status.PENDING
