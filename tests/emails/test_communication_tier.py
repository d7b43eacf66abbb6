"""The communication tier in every prompt's memory block: the last emails sent (date,
kind, subject, first line), within the budget, read in one query."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import User
from coach.communication import sent_emails_for
from emails.models import WENT_OUT, Email
from emails.selectors import LAST_EMAILS, QUOTED, emails_sent_lately
from memory.context import EMAILS_HEADER, MemoryContext, assemble_memory_context
from memory.memory_lines import day_said
from tests.emails.factories import make_email

pytestmark = pytest.mark.django_db


def sent(user: User, subject: str, *, days_ago: int, kind: str = "nudge") -> Email:
    return make_email(
        user,
        kind=kind,
        period_key=subject,
        status="sent",
        subject=subject,
        body=f"Hi Ada,\n\n{subject}, in a sentence.\n\nTalk soon,\nYour coach",
        sent_at=timezone.now() - timedelta(days=days_ago),
    )


EMAIL_LINE = re.compile(
    r'^- (?P<sent>\d{1,2} \w{3}(?: \d{4})?), (?P<kind>[^"]+) "(?P<subject>.*)": (?P<first_line>.*)$'
)


def said(email: Email) -> str:
    """The day an email went, as the block says it (the person's calendar: UTC here)."""
    return day_said(email.sent_at.date(), today=timezone.now().date())


def email_lines(text: str) -> list[dict]:
    """The emails the block quotes, after its emails heading: one line each."""
    emails = text.split(EMAILS_HEADER, 1)[1] if EMAILS_HEADER in text else ""
    return [m.groupdict() for line in emails.splitlines() if (m := EMAIL_LINE.match(line))]


def chat_context(user: User, budget_tokens: int | None = None) -> MemoryContext:
    """The memory block as the chat assembles it: with the emails the emails app hands it."""
    return assemble_memory_context(
        user=user, now=timezone.now(), sent_emails=sent_emails_for(user), budget_tokens=budget_tokens
    )


def test_the_chat_sees_the_last_emails_sent_newest_first_with_date_kind_subject_and_first_line(user: User) -> None:
    older = sent(user, "Looking ahead", days_ago=8)
    newer = sent(user, "How did the talk go?", days_ago=1, kind="check_in")
    make_email(user, period_key="queued", subject="Not sent yet", body="Hi Ada,\n\nNot yet.")
    make_email(user, period_key="skipped", status="skipped", subject="Too alike", body="Hi Ada,\n\nAlike.")

    context = chat_context(user)

    assert "# emails you sent them lately, newest first: never repeat one" in context.text
    assert email_lines(context.text) == [
        {
            "sent": said(newer),
            "kind": "Check-in",
            "subject": "How did the talk go?",
            "first_line": "How did the talk go?, in a sentence.",
        },
        {
            "sent": said(older),
            "kind": "Nudge",
            "subject": "Looking ahead",
            "first_line": "Looking ahead, in a sentence.",
        },
    ]
    assert context.text.index("## emails you sent") < context.text.index("<<END MEMORIES")


def test_at_most_the_last_five_emails_are_shown(user: User) -> None:
    for day in range(8):
        sent(user, f"Email {day}", days_ago=day)

    context = chat_context(user)

    assert [line["subject"] for line in email_lines(context.text)] == [f"Email {day}" for day in range(5)]


def test_the_emails_give_way_when_the_budget_is_spent(user: User) -> None:
    sent(user, "Looking ahead", days_ago=1)

    context = chat_context(user, budget_tokens=10)

    assert email_lines(context.text) == []
    assert [(item.kind, item.topic, item.label, item.form) for item in context.dropped] == [
        ("email", "emails", "Looking ahead", "left out")
    ]


def test_another_persons_emails_never_show(user: User, other_user: User) -> None:
    sent(other_user, "Grace's plan", days_ago=1)

    assert email_lines(chat_context(user).text) == []


def test_the_tier_costs_one_query_however_many_emails(user: User, django_assert_num_queries) -> None:
    for day in range(12):
        sent(user, f"Email {day}", days_ago=day)

    with django_assert_num_queries(2):  # the memories, the emails
        chat_context(user)


def test_the_prompts_emails_are_read_in_one_query_with_only_what_is_quoted(
    user: User, other_user: User, django_assert_num_queries
) -> None:
    same_moment = timezone.now() - timedelta(days=2)
    for n in range(4):
        # Four sent at the same moment: the tie-breaks decide their order.
        make_email(
            user, period_key=f"tie-{n}", status="sent", subject=f"Tie {n}", body="Hi,\n\nTied.", sent_at=same_moment
        )
    sent(user, "Newest", days_ago=0)
    sent(user, "Oldest", days_ago=30)
    sent(other_user, "Someone else's", days_ago=0)
    make_email(user, period_key="queued", subject="Not sent yet", body="Hi Ada,\n\nNot yet.")

    with django_assert_num_queries(1):
        read = emails_sent_lately(user=user, limit=LAST_EMAILS)

    went_out = Email.objects.filter(user=user, status__in=WENT_OUT)
    expected = sorted(went_out, key=lambda e: (e.sent_at, e.created_at, e.pk), reverse=True)[:LAST_EMAILS]
    assert [e.pk for e in read] == [e.pk for e in expected] and len(read) == LAST_EMAILS
    quoted = [(e.kind, e.subject, e.body_text, e.sent_at, e.created_at) for e in expected]
    assert [(e.kind, e.subject, e.body_text, e.sent_at, e.created_at) for e in read] == quoted
    not_read = {field.attname for field in Email._meta.concrete_fields if field.name not in {"id", *QUOTED}}
    assert read[0].get_deferred_fields() == not_read >= {"body_html", "embedding", "status", "user_id"}
