"""The same message sent twice at the same moment (two tabs, a double click that beats
the page) is stored once: the second submission waits for the first and then sees it."""

from __future__ import annotations

import threading

import pytest
from django.db import transaction
from django.utils import timezone

from accounts.models import User
from coach.models import ChatSession, Message
from coach.services import message_post, session_start
from tests.coach.races import race

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_same_words_sent_twice_at_once_are_stored_once(user: User) -> None:
    session = session_start(user=user)
    saved, release = threading.Event(), threading.Event()
    results: list[Message] = []

    def first_submission() -> None:
        # Saved, and not yet committed, when the second submission arrives.
        with transaction.atomic():
            ChatSession.objects.select_for_update().get(pk=session.pk)
            results.append(
                Message.objects.create(
                    session=session,
                    role=Message.Role.USER,
                    content="Plan my week",
                    status=Message.Status.PENDING,
                    created_at=timezone.now(),
                )
            )
            saved.set()
            release.wait(10)

    def second_submission() -> None:
        results.append(message_post(session=session, text="Plan my week", client_id=None))

    race(first_submission, second_submission, holding=saved, release=release)

    assert [message.pk for message in results] == [results[0].pk, results[0].pk]
    assert Message.objects.filter(session=session, role=Message.Role.USER).count() == 1
