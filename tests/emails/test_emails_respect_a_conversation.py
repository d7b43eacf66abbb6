"""Emails that respect a conversation: no nudge or check-in reaches a person in their first
day, while they are in a conversation, or within EMAIL_WAIT_AFTER_CHAT_HOURS of their last
message; and no email asks for a reply that nobody reads: it links to the chat instead, in
the bytes the SMTP server receives."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from accounts.models import User
from coach.models import ChatSession
from emails.models import Email
from emails.planning import check_ins_plan, nudges_plan, sending_window
from emails.reply_asks import asks_for_a_reply
from emails.schedule import FIRST_DAY
from emails.selectors import next_nudge_for_user
from emails.sending import SendOutcome, email_send
from offline_coach import ModelServer
from offline_coach.documents import follow_up_email
from tests.coach.factories import make_session
from tests.emails.factories import prefer, settled
from tests.emails.smtp_sink import SmtpSink
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db

MONDAY_NOON = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
ASKING = (
    "Subject: Looking ahead: your talk\n\nHi Ada,\n\nI've been thinking about your talk. How is it going? "
    "Reply with a time that suits you.\n\nEven a one-line reply helps me plan.\n\nTalk soon,\nYour coach"
)


def a_person_due_everything(user: User, *, last_said: datetime, joined: datetime | None = None) -> User:
    """Weekly nudges in UTC, an intention five days away; signed up and last wrote as given."""
    prefer(settled(user), time_zone="UTC")
    make_session(user, "I'm giving a talk next week", "Good luck!")
    ChatSession.objects.filter(user=user).update(last_message_at=last_said)
    if joined is not None:
        User.objects.filter(pk=user.pk).update(date_joined=joined)
    make_memory(user, "talk", tier="prospective", category="project", due_at=MONDAY_NOON + timedelta(days=5))
    return user


def planned(now: datetime) -> tuple[int, int]:
    return check_ins_plan(now=now), nudges_plan(now=now)


def test_no_nudge_or_check_in_comes_while_the_person_is_in_a_conversation(user: User, settings) -> None:
    settings.EMAIL_WAIT_AFTER_CHAT_HOURS = 0
    a_person_due_everything(user, last_said=MONDAY_NOON - timedelta(minutes=8))

    assert planned(MONDAY_NOON) == (0, 0)
    # Once the conversation has ended idle, they may hear from their coach.
    assert planned(MONDAY_NOON + timedelta(minutes=settings.COACH_SESSION_IDLE_MINUTES)) == (1, 0)


def test_no_nudge_or_check_in_comes_within_the_settings_hours_of_the_last_message(user: User, settings) -> None:
    settings.EMAIL_WAIT_AFTER_CHAT_HOURS = 12
    a_person_due_everything(user, last_said=MONDAY_NOON - timedelta(hours=11, minutes=59))

    assert planned(MONDAY_NOON) == (0, 0)
    # The check-in comes first (and, the gap between two being a few days, no nudge beside it).
    assert planned(MONDAY_NOON + timedelta(minutes=1)) == (1, 0)


def test_nobody_hears_from_their_coach_by_email_in_their_first_day(user: User) -> None:
    joined = MONDAY_NOON - FIRST_DAY + timedelta(minutes=1)
    a_person_due_everything(user, last_said=joined, joined=joined)

    assert planned(MONDAY_NOON) == (0, 0)
    assert planned(MONDAY_NOON + timedelta(minutes=1)) == (1, 0)


def test_the_account_page_promises_no_note_before_the_wait_after_a_chat_is_over(user: User, settings) -> None:
    settings.EMAIL_WAIT_AFTER_CHAT_HOURS = 12
    a_person_due_everything(user, last_said=MONDAY_NOON)

    coming = next_nudge_for_user(user=user, now=MONDAY_NOON, window=sending_window())

    assert coming is not None and coming >= MONDAY_NOON + timedelta(hours=12)


def test_an_email_asks_for_no_reply_and_links_to_the_chat_in_the_bytes_sent(
    user: User, model_server: ModelServer, smtp_sink: SmtpSink, settings
) -> None:
    prefer(settled(user), time_zone="UTC")
    make_session(user, "Hello", "Hi!")
    settled(user)
    assert nudges_plan(now=MONDAY_NOON) == 1
    model_server.queue_text(ASKING)

    assert email_send(email_id=Email.objects.get(kind="nudge").pk, now=MONDAY_NOON) == SendOutcome.SENT

    [raw] = smtp_sink.raw
    received = raw.decode().replace("=\r\n", "").replace("=\n", "")
    assert "reply" not in received.lower()
    assert "I've been thinking about your talk. How is it going?" in received
    chat = f"{settings.SITE_URL}/"
    assert f"To answer your coach, write to it in your chat: {chat}" in received
    assert f'<a href=3D"{chat}"' in raw.decode() or f'<a href="{chat}"' in received
    assert "Open your chat" in received
    sent = Email.objects.get(kind="nudge")
    assert "Reply" not in sent.body_text and "reply" not in sent.body_html


def test_the_drafting_instructions_say_a_reply_goes_nowhere(user: User, model_server: ModelServer) -> None:
    prefer(settled(user), time_zone="UTC")
    make_session(user, "Hello", "Hi!")
    settled(user)
    nudges_plan(now=MONDAY_NOON)
    model_server.queue_text("Subject: Hi\n\nHi Ada,\n\nHow was the week?")

    email_send(email_id=Email.objects.get(kind="nudge").pk, now=MONDAY_NOON)

    instructions = ModelServer.system_prompt(model_server.chat_requests()[-1])
    assert "nobody reads a reply to it. Never ask them to reply" in instructions


@pytest.mark.parametrize("asked", ["", "check-in about something they have coming up on 2026-12-05: “Your talk”"])
def test_the_demo_coach_never_asks_for_an_email_reply_in_any_of_its_drafts(asked: str) -> None:
    previous: list[str] = []
    for _ in range(6):
        system = "# Follow-up email\n\n" + "\n".join(f"Previous email: {line}" for line in previous)
        messages = [{"role": "system", "content": system}, {"role": "user", "content": f"Write a {asked or 'nudge'}."}]

        draft = follow_up_email(messages, today=MONDAY_NOON.date())

        subject, _, body = draft.partition("\n\n")
        assert not [line for line in body.replace("\n", " ").split(". ") if asks_for_a_reply(line)], draft
        previous.append(
            f"{subject.removeprefix('Subject: ')} — {body.splitlines()[2] if len(body.splitlines()) > 2 else body}"
        )
