"""The claim's promises, whatever order the attempts' steps come in.

A hypothesis state machine plays the attempts at answering one message: claims from two
tabs at once, retries, heartbeats, saves, failures and stops from attempts long dead as
well as the live one, processes dying, and the sweep. After every step: a step of an
attempt that no longer holds the message changed nothing; the message is answered at
most once; a failed message has no whole reply; a running message is held by the
attempt that claimed it last.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import timedelta

import pytest
from django.db.models.functions import Now
from django.utils import timezone
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from coach.claims import (
    Attempt,
    TurnLost,
    message_continue,
    message_retry,
    reply_fail,
    reply_save,
    reply_stop,
    turn_claim,
    turn_heartbeat,
    turns_sweep,
)
from coach.models import Message
from coach.services import message_post, session_start
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

STEPS = [0]
PEOPLE = itertools.count()
Status = Message.Status
partials = st.sampled_from(["", "  ", "Monday: an easy run.", "Half a"])


class Attempts(RuleBasedStateMachine):
    @initialize()
    def a_message_is_posted(self) -> None:
        self.user = make_user(f"person-{next(PEOPLE)}@example.com")
        self.message = message_post(session=session_start(user=self.user), text="Plan my week", client_id=None)
        self.attempts: list[Attempt] = []

    # The attempts' steps ---------------------------------------------------------------------

    @rule()
    def a_turn_claims_it(self) -> None:
        before = self._state()
        attempt = turn_claim(message_id=self.message.pk, user_id=self.user.pk, now=timezone.now())
        if before[0] != Status.PENDING:
            assert attempt is None and self._state() == before
        else:
            assert attempt is not None
            # As turn_begin has it: an attempt asked to go on from a part-reply carries it.
            continues = Message.objects.get(pk=self.message.pk).continues_reply_id
            if continues is not None:
                attempt = replace(attempt, continues=Message.objects.get(pk=continues))
            self.attempts.append(attempt)
        STEPS[0] += 1

    @precondition(lambda self: self.attempts)
    @rule(which=st.integers(min_value=0), text=st.sampled_from(["Three short runs.", "Rest."]))
    def an_attempt_saves_its_reply(self, which: int, text: str) -> None:
        attempt, holds, before = self._pick(which)
        try:
            reply_save(attempt=attempt, text=text)
        except TurnLost:
            assert not holds and self._state() == before
        else:
            assert holds and self._state()[0] == Status.ANSWERED

    @precondition(lambda self: self.attempts)
    @rule(which=st.integers(min_value=0), partial=partials)
    def an_attempt_fails(self, which: int, partial: str) -> None:
        attempt, holds, before = self._pick(which)
        assert reply_fail(attempt=attempt, error="the model is away", partial_text=partial) == holds
        if not holds:
            assert self._state() == before

    @precondition(lambda self: self.attempts)
    @rule(which=st.integers(min_value=0), partial=partials)
    def an_attempts_reply_reaches_its_length_limit(self, which: int, partial: str) -> None:
        attempt, holds, before = self._pick(which)
        limited = reply_fail(attempt=attempt, error="length", partial_text=partial, limited=True)
        assert limited == holds
        if not holds:
            assert self._state() == before

    @precondition(lambda self: self.attempts)
    @rule(which=st.integers(min_value=0), partial=partials)
    def an_attempt_is_stopped(self, which: int, partial: str) -> None:
        attempt, holds, before = self._pick(which)
        assert reply_stop(attempt=attempt, partial_text=partial) == holds
        if not holds:
            assert self._state() == before

    @precondition(lambda self: self.attempts)
    @rule(which=st.integers(min_value=0))
    def an_attempt_beats(self, which: int) -> None:
        attempt, holds, _ = self._pick(which)
        assert turn_heartbeat(attempt=attempt) == holds

    @rule()
    def the_person_retries(self) -> None:
        failed = self._state()[0] == Status.FAILED
        assert message_retry(message=Message.objects.get(pk=self.message.pk)) == failed
        STEPS[0] += 1

    @rule()
    def the_person_has_the_coach_go_on(self) -> None:
        status, replies = self._state()
        can = status == Status.FAILED and Status.LIMITED in [kind for kind, _ in replies]
        assert message_continue(message=Message.objects.get(pk=self.message.pk)) == can
        STEPS[0] += 1

    @rule()
    def the_running_attempts_process_dies(self) -> None:
        Message.objects.filter(pk=self.message.pk).update(heartbeat_at=Now() - timedelta(seconds=60))

    @rule()
    def the_sweep_runs(self) -> None:
        before = self._state()
        turns_sweep(silent_seconds=30)
        if before[0] == Status.ANSWERING and self._state()[0] != Status.ANSWERING:
            assert self._state()[0] == Status.FAILED
        STEPS[0] += 1

    # What always holds ---------------------------------------------------------------------

    @invariant()
    def answered_at_most_once_and_never_whole_when_failed(self) -> None:
        if not hasattr(self, "message"):
            return
        status, replies = self._state()
        kinds = [kind for kind, _ in replies]
        assert kinds.count(Status.COMPLETE) + kinds.count(Status.STOPPED) <= 1
        # One part-reply at most: a continuation's replaces the one it went on from.
        assert kinds.count(Status.INTERRUPTED) + kinds.count(Status.LIMITED) <= 1
        if Status.COMPLETE in kinds or Status.STOPPED in kinds:
            assert Status.LIMITED not in kinds and Status.INTERRUPTED not in kinds
        if status in (Status.FAILED, Status.PENDING, Status.ANSWERING):
            assert Status.COMPLETE not in kinds and Status.STOPPED not in kinds
        if status == Status.ANSWERING:
            assert Message.objects.get(pk=self.message.pk).attempt == self.attempts[-1].token

    # Reading the message -------------------------------------------------------------------

    def _pick(self, which: int) -> tuple[Attempt, bool, tuple[str, list[tuple[str, str]]]]:
        """An attempt (the live one or one long dead), whether it holds the message now, and
        the message's state before its step."""
        attempt = self.attempts[which % len(self.attempts)]
        row = Message.objects.get(pk=self.message.pk)
        STEPS[0] += 1
        return attempt, row.status == Status.ANSWERING and row.attempt == attempt.token, self._state()

    def _state(self) -> tuple[str, list[tuple[str, str]]]:
        status = Message.objects.values_list("status", flat=True).get(pk=self.message.pk)
        replies = list(Message.objects.filter(reply_to=self.message).order_by("pk").values_list("status", "content"))
        return status, replies


def test_a_message_is_answered_once_whatever_its_attempts_do() -> None:
    STEPS[0] = 0
    run_state_machine_as_test(
        Attempts,
        settings=settings(
            max_examples=30,
            stateful_step_count=40,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
    assert STEPS[0] >= 400, STEPS[0]
