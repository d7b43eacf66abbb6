"""Prospective check-ins: "a talk in June" is asked about once, in May; the intention is
then `raised`, and the next chat knows it was, and what the email said."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from accounts.models import User
from coach.conversation import system_prompt
from emails.models import Email
from emails.planning import check_ins_plan
from emails.sending import SendOutcome, email_send
from memory.models import Memory
from offline_coach import ModelServer
from tests.emails.factories import prefer, settled
from tests.emails.smtp_sink import SmtpSink
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db

TALK_DAY = datetime(2026, 6, 15, 9, 0, tzinfo=UTC)
IN_APRIL = datetime(2026, 4, 20, 12, 0, tzinfo=UTC)
IN_MAY = datetime(2026, 5, 20, 12, 0, tzinfo=UTC)


@pytest.fixture
def talk(user: User) -> Memory:
    prefer(settled(user), time_zone="UTC")
    return make_memory(
        user, "ted-talk", tier="prospective", category="project", summary="Giving a TED talk", due_at=TALK_DAY
    )


def test_a_talk_in_june_gets_one_check_in_in_may_and_none_once_it_was_raised(
    user: User, talk: Memory, model_server: ModelServer, smtp_sink: SmtpSink
) -> None:
    assert check_ins_plan(now=IN_APRIL) == 0
    assert check_ins_plan(now=IN_MAY) == 1

    check_in = Email.objects.get(kind="check_in")
    assert email_send(email_id=check_in.pk, now=IN_MAY) == SendOutcome.SENT
    smtp_sink.wait_for_messages(1)
    asked = model_server.chat_requests()[-1]["messages"][-1]["content"]
    assert "coming up on 2026-06-15: “Giving a TED talk”" in asked

    for later in (IN_MAY + timedelta(hours=1), IN_MAY + timedelta(days=3), datetime(2026, 6, 14, 12, tzinfo=UTC)):
        assert check_ins_plan(now=later) == 0
    assert Email.objects.filter(kind="check_in").count() == 1
    assert len(smtp_sink.messages) == 1
    talk.refresh_from_db()
    assert talk.status == "raised" and talk.raised_at == IN_MAY


def test_the_next_chat_knows_the_intention_was_raised_and_what_the_email_said(
    user: User, talk: Memory, model_server: ModelServer
) -> None:
    check_ins_plan(now=IN_MAY)
    email_send(email_id=Email.objects.get(kind="check_in").pk, now=IN_MAY)
    sent = Email.objects.get(kind="check_in")

    prompt, _ = system_prompt(user=user, now=IN_MAY + timedelta(days=1), remembers=True)

    line = next(line for line in prompt.splitlines() if line.startswith("- ted-talk ("))
    assert "emailed about 20 May" in line
    assert f'- 20 May, Check-in "{sent.subject}": ' in prompt


def test_an_intention_already_past_gets_no_check_in(user: User, talk: Memory) -> None:
    assert check_ins_plan(now=TALK_DAY + timedelta(hours=3)) == 0


def test_a_check_in_that_could_not_be_sent_does_not_block_the_next_intention(
    user: User, talk: Memory, model_server: ModelServer
) -> None:
    make_memory(user, "race", tier="prospective", category="goal", due_at=TALK_DAY + timedelta(days=5))
    check_ins_plan(now=IN_MAY)
    model_server.queue_error(400)
    assert email_send(email_id=Email.objects.get(kind="check_in").pk, now=IN_MAY) == SendOutcome.FAILED

    assert check_ins_plan(now=IN_MAY + timedelta(days=1)) == 1
    assert Email.objects.order_by("-pk").values_list("memory__key", flat=True).first() == "race"
