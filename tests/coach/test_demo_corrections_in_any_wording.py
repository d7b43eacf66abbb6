"""One correction in ten wordings, written from the fact and the change alone, before the
code that reads them (tests/coach/demo_people.py): the demo changes the memory for at least
nine, through the real app over ASGI, on the embeddings it ships."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import User
from coach.models import ChatSession
from coach.services import session_start
from memory.models import Memory
from offline_coach import ModelServer
from tests.coach.demo_people import JOB_CHANGE_WORDINGS, JOB_FACT
from tests.coach.test_demo_walk import on_minilm, say
from tests.conftest import make_user

__all__ = ["on_minilm"]
# What the memory of the job must no longer say, and what it must say now.
OLD = ("baker", "4am")
NEW = "bank"
AT_LEAST = 9


def corrected(live_app: str, client: Client, number: int, wording: str) -> tuple[bool, str, str]:
    """Whether `wording`, said in a new conversation, changed the memory of the job; what the
    memories say after it, and the reply."""
    user = make_user(f"wording{number}@example.com")
    client.force_login(user)
    say(live_app, client, session_start_for(user), JOB_FACT)
    reply = say(live_app, client, session_start_for(user), wording)
    summaries = " | ".join(m.summary for m in Memory.objects.filter(user=user).order_by("pk"))
    changed = NEW in summaries.lower() and not any(word in summaries.lower() for word in OLD)
    return changed, summaries, reply


def session_start_for(user: User) -> ChatSession:
    return session_start(user=user)


def test_at_least_nine_of_ten_wordings_of_one_correction_change_the_memory(
    live_app: str, client: Client, on_minilm: ModelServer
) -> None:
    outcomes = [corrected(live_app, client, n, wording) for n, wording in enumerate(JOB_CHANGE_WORDINGS)]
    for wording, (changed, summaries, reply) in zip(JOB_CHANGE_WORDINGS, outcomes, strict=True):
        print(f"{'changed' if changed else 'NOT changed'}: {wording}\n  memory: {summaries}\n  reply: {reply}")  # noqa: T201

    assert sum(changed for changed, _, _ in outcomes) >= AT_LEAST


@pytest.mark.parametrize("wording", JOB_CHANGE_WORDINGS[:1])
def test_after_the_change_the_next_question_gets_the_new_job_and_not_the_old(
    live_app: str, client: Client, on_minilm: ModelServer, wording: str
) -> None:
    user = make_user("asks-after@example.com")
    client.force_login(user)
    say(live_app, client, session_start_for(user), JOB_FACT)
    conversation = session_start_for(user)
    say(live_app, client, conversation, wording)

    reply = say(live_app, client, conversation, "When's the best time of day for me to train?")

    assert "bank" in reply.lower() and "4am" not in reply and "baker" not in reply.lower()
