"""Sending one planned email: drafted by the model with what the coach knows, never like
the last ones, sent once over SMTP with a one-click unsubscribe, and held back or
skipped whenever the person's preferences say so, read again at the last moment."""

from __future__ import annotations

import smtplib
from datetime import UTC, datetime, time, timedelta
from email.message import EmailMessage
from urllib.parse import urlsplit

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

import emails.sending
from accounts.models import User
from emails.delivery import is_temporary_smtp_failure
from emails.models import Email, EmailPreference
from emails.planning import nudges_plan
from emails.sending import EmailTemporaryFailure, SendOutcome, email_send
from emails.tasks import send_email
from emails.unsubscribe import unsubscribe_token
from memory.models import MemoryEvent
from offline_coach import ModelServer
from tests.coach.factories import make_session
from tests.emails.factories import make_email, prefer, reachable_now, settled
from tests.emails.smtp_sink import REFUSE, TRY_LATER, SmtpSink
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db

DRAFT = "Subject: Your marathon plan\n\nHi Ada,\n\nHow did the long run go on Sunday?\n\nTalk soon,\nYour coach"


def planned(user: User, **fields: object) -> Email:
    return make_email(user, **fields)


def html_of(message: EmailMessage) -> str:
    part = message.get_body(preferencelist=("html",))
    assert part is not None
    return part.get_content()


def text_of(message: EmailMessage) -> str:
    part = message.get_body(preferencelist=("plain",))
    assert part is not None
    return part.get_content()


# What goes over the wire ------------------------------------------------------------------


def test_an_email_goes_out_as_text_and_html_with_a_one_click_unsubscribe(
    user: User, model_server: ModelServer, smtp_sink: SmtpSink
) -> None:
    reachable_now(user)
    email = planned(user)
    model_server.queue_text(DRAFT)

    assert email_send(email_id=email.pk) == SendOutcome.SENT

    [message] = smtp_sink.wait_for_messages(1)
    link = f"http://127.0.0.1:8000/emails/unsubscribe/{unsubscribe_token(user.pk)}/"
    assert message["To"] == "ada@example.com"
    assert message["Subject"] == "Your marathon plan"
    assert message["List-Unsubscribe"] == f"<{link}>"
    assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert "How did the long run go on Sunday?" in text_of(message)
    assert link in text_of(message)
    assert '<p style="margin:0 0 16px;">How did the long run go on Sunday?</p>' in html_of(message)
    assert f'href="{link}"' in html_of(message)
    email.refresh_from_db()
    assert email.status == "sent" and email.sent_at is not None and email.attempts == 1
    assert email.provider_message_id == message["Message-ID"]


def test_what_the_model_writes_is_escaped_in_the_html(user: User, model_server: ModelServer) -> None:
    reachable_now(user)
    email = planned(user)
    model_server.queue_text('Subject: Hi\n\nHi Ada,\n\n<script>alert("x")</script> & <b>bold</b>\nnext line')

    email_send(email_id=email.pk)

    html = mail.outbox[0].alternatives[0].content
    assert "<script>" not in html and "<b>" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;<br>next line" in html


HOSTILE_DRAFT = (
    "Subject: Read https://evil.example/s?q=HIV-positive\n\n"
    "Hi Ada,\n\nYour results: https://evil.example/r?q=HIV-positive. Or [here](https:evil.example/m?q=HIV-positive), "
    "www.evil.example/w?q=HIV-positive, evil.example/p?q=HIV-positive and "
    "mailto:help@evil.example?body=HIV-positive.\n\nYour memories: {site}/memories/"
)


def test_an_address_the_model_writes_reaches_the_inbox_only_on_our_own_host(
    user: User, model_server: ModelServer, smtp_sink: SmtpSink, settings
) -> None:
    reachable_now(user)
    email = planned(user)
    model_server.queue_text(HOSTILE_DRAFT.format(site=settings.SITE_URL))

    assert email_send(email_id=email.pk) == SendOutcome.SENT

    [message] = smtp_sink.wait_for_messages(1)
    [raw] = smtp_sink.raw
    # The bytes as they came, with quoted-printable's soft line breaks undone, and each part decoded.
    received = [raw.decode().replace("=\r\n", "").replace("=\n", ""), message["Subject"]]
    received += [text_of(message), html_of(message)]
    for part in received:
        assert "HIV-positive" not in part and "evil.example/" not in part
    assert message["Subject"] == "Read evil.example"
    assert (
        "Your results: evil.example. Or [here](evil.example), www.evil.example, evil.example and evil.example."
        in text_of(message)
    )
    assert f"Your memories: {settings.SITE_URL}/memories/" in text_of(message)


def test_a_draft_without_a_subject_line_still_goes_out_with_a_plain_one(user: User, model_server: ModelServer) -> None:
    reachable_now(user)
    email = planned(
        user,
        kind="check_in",
        memory=make_memory(user, "talk", tier="prospective", due_at=timezone.now() + timedelta(days=9)),
    )
    model_server.queue_text("Hi Ada,\n\nHow is the talk coming along?")

    email_send(email_id=email.pk)

    assert mail.outbox[0].subject == "How is it going?"
    assert mail.outbox[0].body.startswith("Hi Ada,\n\nHow is the talk coming along?")


# Drafting with what the coach knows, unlike the last emails ---------------------------------


def test_the_model_drafts_with_the_profile_the_intentions_due_and_the_last_emails(
    user: User, model_server: ModelServer
) -> None:
    reachable_now(user)
    make_memory(user, "marathon", tier="profile", category="goal", summary="Training for the Helsinki marathon")
    make_memory(
        user,
        "talk",
        tier="prospective",
        category="project",
        summary="TED talk",
        due_at=timezone.now() + timedelta(days=20),
    )
    make_email(
        user,
        period_key="2026-W47",
        status="sent",
        subject="Looking ahead: your talk",
        body="Hi Ada,\n\nI've been thinking about your talk.",
        sent_at=timezone.now() - timedelta(days=7),
    )
    email = planned(user)

    email_send(email_id=email.pk)

    system = ModelServer.system_prompt(model_server.chat_requests()[-1])
    assert system.startswith("# Follow-up email")
    assert "Training for the Helsinki marathon" in system
    assert "\n- talk (" in system
    assert ', Nudge "Looking ahead: your talk": ' in system
    assert "Previous email: Looking ahead: your talk — I've been thinking about your talk." in system


def test_two_consecutive_nudges_differ_and_the_second_draft_saw_the_first(
    user: User, model_server: ModelServer
) -> None:
    prefer(user, time_zone="UTC")
    make_session(user, "I'm training for the Helsinki marathon", "Great, when is it?")
    settled(user)
    make_memory(user, "marathon", tier="profile", category="goal", summary="Training for the Helsinki marathon")
    monday = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

    nudges_plan(now=monday)
    email_send(email_id=Email.objects.get(period_key="2026-W49").pk, now=monday)
    nudges_plan(now=monday + timedelta(days=7))
    email_send(email_id=Email.objects.get(period_key="2026-W50").pk, now=monday + timedelta(days=7))

    first, second = Email.objects.filter(kind="nudge").order_by("sent_at")
    assert first.status == second.status == "sent"
    assert first.subject != second.subject
    assert first.first_line != second.first_line
    second_draft = ModelServer.system_prompt(model_server.chat_requests()[-1])
    assert f"Previous email: {first.subject} — {first.first_line}" in second_draft
    assert f' "{first.subject}": ' in second_draft


def sent_last_week(user: User) -> Email:
    """The email the drafts below come too close to."""
    return make_email(
        user,
        period_key="2026-W47",
        status="sent",
        subject="Your marathon plan",
        body="Hi Ada,\n\nHow did the long run go on Sunday?\n\nTalk soon,\nYour coach",
        sent_at=timezone.now() - timedelta(days=7),
    )


def test_a_draft_like_an_earlier_email_is_redrafted_once(user: User, model_server: ModelServer) -> None:
    reachable_now(user)
    sent_last_week(user)
    email = planned(user)
    model_server.queue_text(DRAFT)
    model_server.queue_text("Subject: A rest day idea\n\nHi Ada,\n\nTake Thursday off entirely.\n\nBest,\nYour coach")

    assert email_send(email_id=email.pk) == SendOutcome.SENT

    assert mail.outbox[0].subject == "A rest day idea"
    redraft = model_server.chat_requests()[-1]["messages"]
    assert redraft[-2] == {"role": "assistant", "content": DRAFT}
    assert "Previous email: Your marathon plan — How did the long run go on Sunday?" in redraft[-1]["content"]


def test_a_draft_still_like_an_earlier_email_after_the_redraft_is_skipped_not_sent(
    user: User, model_server: ModelServer
) -> None:
    reachable_now(user)
    earlier = sent_last_week(user)
    email = planned(user)
    model_server.queue_text(DRAFT)
    model_server.queue_text(DRAFT)

    assert email_send(email_id=email.pk) == SendOutcome.SKIPPED

    email.refresh_from_db()
    assert mail.outbox == []
    assert email.status == "skipped"
    # The plain `error` column names the earlier email by id and date, never its subject.
    assert f"both drafts read like email {earlier.pk} of {earlier.sent_at:%Y-%m-%d}" in email.error
    assert "marathon" not in email.error.lower()
    assert len(model_server.chat_requests()) == 2


def test_a_draft_like_an_email_sent_months_and_many_emails_ago_is_redrafted_too(
    user: User, model_server: ModelServer
) -> None:
    reachable_now(user)
    now = timezone.now()
    make_email(
        user,
        period_key="old",
        status="sent",
        subject="Your marathon plan",
        body="Hi Ada,\n\nHow did the long run go on Sunday?\n\nTalk soon,\nYour coach",
        sent_at=now - timedelta(days=60),
    )
    for week in range(5):
        make_email(
            user,
            period_key=f"recent-{week}",
            status="sent",
            subject=f"Note {week}",
            body=f"Hi Ada,\n\nSomething else entirely, number {week}.",
            sent_at=now - timedelta(days=7 * (week + 1)),
        )
    email = planned(user)
    model_server.queue_text(DRAFT)
    model_server.queue_text("Subject: A rest day idea\n\nHi Ada,\n\nTake Thursday off entirely.\n\nBest,\nYour coach")

    assert email_send(email_id=email.pk) == SendOutcome.SENT

    # Never repeating means never: the likeness is looked for in every email sent, not the last few.
    assert len(model_server.chat_requests()) == 2
    assert mail.outbox[0].subject == "A rest day idea"


# Held back, skipped, failed ------------------------------------------------------------------


def test_an_email_due_at_night_waits_for_the_persons_morning(user: User, model_server: ModelServer) -> None:
    prefer(user, time_zone="Europe/Helsinki", quiet_start=time(21, 0), quiet_end=time(8, 30))
    email = planned(user)
    late = datetime(2026, 11, 30, 21, 10, tzinfo=UTC)  # 23:10 in Helsinki

    assert email_send(email_id=email.pk, now=late) == SendOutcome.DEFERRED

    email.refresh_from_db()
    assert email.status == "queued" and email.subject is None
    assert email.send_after == datetime(2026, 12, 1, 7, 0, tzinfo=UTC)  # 09:00 in Helsinki
    assert mail.outbox == [] and model_server.chat_requests() == []


def test_an_email_queued_before_the_person_unsubscribed_is_not_sent(user: User, model_server: ModelServer) -> None:
    reachable_now(user)
    email = planned(user)
    EmailPreference.objects.filter(user=user).update(unsubscribed_at=timezone.now())

    assert email_send(email_id=email.pk) == SendOutcome.SKIPPED

    email.refresh_from_db()
    assert email.status == "skipped" and email.error == "they unsubscribed"
    assert mail.outbox == [] and model_server.chat_requests() == []


def test_an_unsubscribe_while_the_model_writes_stops_the_email_after_the_claim(
    user: User, model_server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    reachable_now(user)
    email = planned(user)
    model_server.queue_text(DRAFT)
    drafting = emails.sending.draft_email

    def draft_then_unsubscribe(**arguments: object) -> object:
        written = drafting(**arguments)
        EmailPreference.objects.filter(user=user).update(unsubscribed_at=timezone.now())
        return written

    monkeypatch.setattr(emails.sending, "draft_email", draft_then_unsubscribe)

    assert email_send(email_id=email.pk) == SendOutcome.SKIPPED

    email.refresh_from_db()
    assert email.status == "skipped" and email.attempts == 1
    assert mail.outbox == []


def test_a_check_in_about_an_intention_closed_meanwhile_is_skipped(user: User, model_server: ModelServer) -> None:
    reachable_now(user)
    talk = make_memory(user, "talk", tier="prospective", due_at=timezone.now() + timedelta(days=9), status="done")
    email = planned(user, kind="check_in", period_key=f"memory-{talk.pk}", memory=talk)

    assert email_send(email_id=email.pk) == SendOutcome.SKIPPED
    assert mail.outbox == []


def test_a_sent_check_in_marks_its_intention_raised(user: User, model_server: ModelServer) -> None:
    reachable_now(user)
    talk = make_memory(user, "talk", tier="prospective", due_at=timezone.now() + timedelta(days=9))
    email = planned(user, kind="check_in", period_key=f"memory-{talk.pk}", memory=talk)

    assert email_send(email_id=email.pk) == SendOutcome.SENT

    talk.refresh_from_db()
    assert talk.status == "raised" and talk.raised_at is not None
    event = MemoryEvent.objects.get(memory_id=talk.pk, action="raised")
    assert (event.actor, event.reason, event.key) == ("coach", "asked about it in a check-in email", "talk")


def test_a_model_outage_while_drafting_is_retried_and_the_email_still_goes_out(
    user: User, model_server: ModelServer
) -> None:
    reachable_now(user)
    email = planned(user)
    model_server.queue_error(503)
    model_server.queue_text(DRAFT)

    # apply() runs the task here, and its retry too (the countdown is not waited out).
    send_email.apply(args=[email.pk])

    email.refresh_from_db()
    assert email.status == "sent"
    assert len(mail.outbox) == 1


def test_a_draft_the_model_can_never_write_is_marked_failed(user: User, model_server: ModelServer) -> None:
    reachable_now(user)
    email = planned(user)
    model_server.queue_error(400)

    assert email_send(email_id=email.pk) == SendOutcome.FAILED

    email.refresh_from_db()
    assert email.status == "failed" and "the model could not write it" in email.error


def test_a_temporary_failure_leaves_the_email_queued_with_its_error_for_the_retry_then_the_dispatcher(
    user: User, model_server: ModelServer, smtp_sink: SmtpSink
) -> None:
    reachable_now(user)
    email = planned(user)
    smtp_sink.answer_next(TRY_LATER)
    before = timezone.now()

    with pytest.raises(EmailTemporaryFailure, match="SMTP 451"):
        email_send(email_id=email.pk, retry_in=120)

    email.refresh_from_db()
    assert email.status == "queued" and email.claimed_at is None and email.claim_token is None
    assert email.error == "SMTP 451: 4.3.0 Mailbox busy, try again later"
    # The task's retry comes first; a minute after it was due, the dispatcher may send it
    # instead (the retry was lost with its worker), not an hour later.
    retry_due = before + timedelta(seconds=120)
    assert retry_due + timedelta(minutes=1) <= email.send_after <= timezone.now() + timedelta(seconds=120 + 61)


def test_a_permanent_failure_is_marked_failed_at_once(
    user: User, model_server: ModelServer, smtp_sink: SmtpSink
) -> None:
    reachable_now(user)
    email = planned(user)
    smtp_sink.answer_next(REFUSE)

    assert email_send(email_id=email.pk) == SendOutcome.FAILED

    email.refresh_from_db()
    assert email.status == "failed" and email.error == "SMTP 550: 5.1.1 No such user here"


def test_tls_asked_of_a_server_without_it_fails_once_and_says_so_in_words(
    user: User, model_server: ModelServer, smtp_sink: SmtpSink, settings, caplog: pytest.LogCaptureFixture
) -> None:
    settings.MAILERS = {"default": {**smtp_sink.mailer, "OPTIONS": {**smtp_sink.mailer["OPTIONS"], "use_tls": True}}}
    reachable_now(user)
    email = planned(user)
    model_server.queue_text(DRAFT)

    with caplog.at_level("ERROR", logger="emails.sending"):
        assert email_send(email_id=email.pk) == SendOutcome.FAILED

    email.refresh_from_db()
    said = f"the mail server at 127.0.0.1:{smtp_sink.port} does not offer TLS, and EMAIL_USE_TLS is true"
    assert email.status == "failed" and email.error.startswith(said)
    assert "set EMAIL_USE_TLS=false" in email.error
    assert any(said in record.getMessage() for record in caplog.records)
    assert smtp_sink.messages == []


def test_an_email_already_sent_is_not_sent_again(user: User, model_server: ModelServer) -> None:
    reachable_now(user)
    email = planned(user)
    email_send(email_id=email.pk)

    assert email_send(email_id=email.pk) == SendOutcome.NOT_OURS
    assert len(mail.outbox) == 1


@pytest.mark.parametrize(
    ("error", "temporary"),
    [
        (smtplib.SMTPDataError(451, b"try later"), True),
        (smtplib.SMTPSenderRefused(421, b"closing", "coach@localhost"), True),
        (smtplib.SMTPRecipientsRefused({"ada@example.com": (450, b"busy")}), True),
        (smtplib.SMTPServerDisconnected("gone"), True),
        (ConnectionRefusedError(111, "refused"), True),
        (TimeoutError("timed out"), True),
        (smtplib.SMTPDataError(550, b"no"), False),
        (smtplib.SMTPAuthenticationError(535, b"bad password"), False),
        (smtplib.SMTPRecipientsRefused({"ada@example.com": (550, b"unknown")}), False),
        (smtplib.SMTPNotSupportedError("no STARTTLS"), False),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, Exception) else str(value),
)
def test_only_4xx_replies_and_network_errors_are_worth_a_retry(error: Exception, temporary: bool) -> None:
    assert is_temporary_smtp_failure(error) is temporary


def raw_header_lines(raw: bytes, name: bytes) -> list[bytes]:
    """Each line of the raw message's header block that starts `name:`, with any folded
    continuation lines joined on (so a fold shows up, rather than hiding)."""
    head = raw.split(b"\r\n\r\n", 1)[0]
    lines: list[bytes] = []
    for line in head.split(b"\r\n"):
        if line[:1] in (b" ", b"\t") and lines:
            lines[-1] += b"\r\n" + line
        else:
            lines.append(line)
    return [line for line in lines if line.lower().startswith(name.lower() + b":")]


def test_the_unsubscribe_headers_arrive_whole_and_unencoded_with_a_long_site_url(
    user: User, model_server: ModelServer, smtp_sink: SmtpSink, settings
) -> None:
    host = "a" * 60 + "." + "b" * 39 + ".example.com"
    settings.SITE_URL = f"https://{host}"
    assert len(settings.SITE_URL) == 120
    reachable_now(user)

    assert email_send(email_id=make_email(user).pk) == SendOutcome.SENT

    [raw] = smtp_sink.raw
    link = f"{settings.SITE_URL}/emails/unsubscribe/{unsubscribe_token(user.pk)}/"
    assert raw_header_lines(raw, b"List-Unsubscribe") == [b"List-Unsubscribe: <" + link.encode() + b">"]
    assert raw_header_lines(raw, b"List-Unsubscribe-Post") == [b"List-Unsubscribe-Post: List-Unsubscribe=One-Click"]
    assert b"=?utf-8?" not in raw.split(b"\r\n\r\n", 1)[0]
    assert raw_header_lines(raw, b"Message-ID")[0].endswith(f"@{host}>".encode())
    response = Client(enforce_csrf_checks=True).post(
        urlsplit(link).path, data="List-Unsubscribe=One-Click", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 200
    assert EmailPreference.objects.get(user=user).unsubscribed_at is not None


def test_an_email_names_its_reader_and_says_why_it_came_how_often_and_how_to_stop_it(
    user: User, model_server: ModelServer, smtp_sink: SmtpSink
) -> None:
    User.objects.filter(pk=user.pk).update(name="Ada Lovelace")
    user.refresh_from_db()
    reachable_now(user, frequency=EmailPreference.Frequency.TWICE_WEEKLY)
    model_server.queue_text(DRAFT)

    assert email_send(email_id=planned(user).pk) == SendOutcome.SENT

    [raw] = smtp_sink.raw
    [message] = smtp_sink.messages
    why = "You get this because you asked your coach to write to you about twice a week between sessions."
    link = f"http://127.0.0.1:8000/emails/unsubscribe/{unsubscribe_token(user.pk)}/"
    assert raw_header_lines(raw, b"To") == [b"To: Ada Lovelace <ada@example.com>"]
    for part in (text_of(message), html_of(message)):
        assert why in part and link in part and "http://127.0.0.1:8000/account/#email-preferences" in part
    assert ">Coach</a>" in html_of(message) and "Coach · http://127.0.0.1:8000" in text_of(message)
