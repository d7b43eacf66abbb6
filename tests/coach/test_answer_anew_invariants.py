"""Answering anew's promises, whatever order the steps come in.

The attempts' state machine (tests/coach/test_attempt_invariants.py: claims, saves,
failures, stops and length limits from dead attempts as well as the live one, retries,
processes dying, the sweep), with the person regenerating and editing the message, from a
fresh page or from one shown before another answer anew, and the live attempt saving
memories. Besides the attempts' own promises, after every step: an ask from a page that
showed an answer that is over is done, and any other changes nothing; an edit of the
words leaves no answer to the old ones, and an attempt claimed before it never adds one;
the history a next turn sends holds the person's words and the current answer only; no
memory is lost by an answer anew.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import datetime

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule, run_state_machine_as_test

from coach.answer_anew import AnswerAnewRefused, message_edit, message_regenerate
from coach.conversation import history_in_steps
from coach.models import UNANSWERED, Message
from memory.models import Memory
from tests.coach.test_attempt_invariants import STEPS, Attempts
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db

MEMORIES = itertools.count()
Status = Message.Status
WORDS = ["Plan my week", "Plan my month", "Plan my year"]
# Whole and stopped answers are kept as earlier ones when the same words are answered again.
KEPT = (Status.COMPLETE, Status.STOPPED, Status.REPLACED)


class AnswersAnew(Attempts):
    @initialize()
    def a_message_is_posted(self) -> None:
        super().a_message_is_posted()
        self.memories = 0
        # When each answer the person was shown was asked for: a stale page sends an old one.
        self.asked: list[datetime] = [self._row().waiting_since]

    @precondition(lambda self: self.attempts)
    @rule()
    def the_live_attempt_saves_a_memory(self) -> None:
        if self._row().status != Status.ANSWERING:
            return
        memory = make_memory(self.user, f"note-{next(MEMORIES)}", summary="Runs on Sundays")
        Memory.objects.filter(pk=memory.pk).update(message_id=self.message.pk, session_id=self.message.session_id)
        self.memories += 1

    @rule(stale=st.booleans())
    def the_person_regenerates(self, stale: bool) -> None:
        self._ask_anew(stale, lambda asked_at: message_regenerate(**self._whose(), asked_at=asked_at))

    @rule(stale=st.booleans(), words=st.sampled_from(WORDS))
    def the_person_edits(self, stale: bool, words: str) -> None:
        self._ask_anew(stale, lambda asked_at: message_edit(**self._whose(), text=words, asked_at=asked_at))

    @invariant()
    def the_next_request_holds_the_words_and_the_current_answer_only(self) -> None:
        if not hasattr(self, "asked"):
            return
        everything = list(Message.objects.filter(session_id=self.message.session_id).order_by("pk"))
        history = history_in_steps(earlier=everything, message=Message(content="And next?"), from_id=None)
        whole = [text for kind, text in self._state()[1] if kind == Status.COMPLETE]
        assert len(whole) <= 1
        assert [(m.role, m.content) for m in history.messages] == [
            ("user", self._row().content),
            *[("assistant", text) for text in whole],
        ]

    @invariant()
    def no_memory_is_lost(self) -> None:
        if hasattr(self, "asked"):
            assert Memory.objects.filter(user=self.user, message_id=self.message.pk).count() == self.memories

    def _ask_anew(self, stale: bool, ask: Callable[[datetime | None], bool]) -> None:
        before, row = self._state(), self._row()
        asked_at = self.asked[0] if stale else row.waiting_since
        try:
            asked = ask(asked_at)
        except AnswerAnewRefused:
            asked = False
        if asked_at == row.waiting_since and before[0] not in UNANSWERED:
            assert asked, "an answer that is over, asked anew from the page that showed it"
            after, changed = self._state(), self._row().content != row.content
            assert after[0] == Status.PENDING and self._row().attempt is None
            assert after[1] == (
                [] if changed else [(Status.REPLACED, text) for kind, text in before[1] if kind in KEPT]
            )
            self.asked.append(self._row().waiting_since)
        else:
            # Still being answered, or asked already since the page was shown: nothing changed.
            assert not asked
            assert self._state() == before and self._row().content == row.content
        STEPS[0] += 1

    def _whose(self) -> dict[str, int]:
        return {"user_id": self.user.pk, "session_id": self.message.session_id, "message_id": self.message.pk}

    def _row(self) -> Message:
        return Message.objects.get(pk=self.message.pk)


def test_answering_anew_keeps_its_promises_whatever_the_attempts_and_the_person_do() -> None:
    STEPS[0] = 0
    run_state_machine_as_test(
        AnswersAnew,
        settings=settings(
            max_examples=60,
            stateful_step_count=40,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
    assert STEPS[0] >= 400, STEPS[0]
