"""One-click unsubscribe (RFC 8058): a POST with no cookies and no CSRF token stops every
email at once and is safe to repeat; opening the link only asks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from accounts.models import User
from emails.models import Email, EmailPreference
from emails.planning import check_ins_plan, nudges_plan, session_recap_plan
from emails.sending import SendOutcome, email_send
from emails.unsubscribe import unsubscribe_token, unsubscribe_url, user_id_from_token
from offline_coach import ModelServer
from tests.coach.factories import make_session
from tests.emails.factories import make_email, prefer, reachable_now
from tests.emails.smtp_sink import SmtpSink
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db

ONE_CLICK = "List-Unsubscribe=One-Click"


def one_click(url: str) -> tuple[int, str]:
    """What a mail client's unsubscribe button sends: a form POST, no cookies, no CSRF token."""
    client = Client(enforce_csrf_checks=True)
    response = client.post(urlsplit(url).path, data=ONE_CLICK, content_type="application/x-www-form-urlencoded")
    return response.status_code, response.content.decode()


def test_one_click_with_no_cookies_stops_every_further_email(user: User, model_server: ModelServer) -> None:
    monday = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    prefer(user, time_zone="UTC", session_summaries=True)
    session = make_session(user, "I ran 10 km", "Well done!")
    session.summary = "They ran 10 km and felt strong."
    session.save()
    make_memory(user, "talk", tier="prospective", due_at=monday + timedelta(days=10))
    queued = make_email(user, period_key="2026-W48")

    status, page = one_click(unsubscribe_url(user.pk))

    assert status == 200 and "You are unsubscribed" in page
    assert EmailPreference.objects.get(user=user).unsubscribed_at is not None
    assert nudges_plan(now=monday) == 0
    assert check_ins_plan(now=monday) == 0
    assert session_recap_plan(session_id=session.pk, now=monday) is None
    assert email_send(email_id=queued.pk, now=monday) == SendOutcome.NOT_OURS
    assert Email.objects.get(pk=queued.pk).status == "skipped"
    assert mail.outbox == [] and model_server.chat_requests() == []


def test_the_link_in_a_sent_email_unsubscribes_its_reader(
    user: User, model_server: ModelServer, smtp_sink: SmtpSink
) -> None:
    reachable_now(user)
    email_send(email_id=make_email(user).pk)
    [message] = smtp_sink.wait_for_messages(1)

    status, _ = one_click(message["List-Unsubscribe"].strip("<>"))

    assert status == 200
    assert EmailPreference.objects.get(user=user).unsubscribed_at is not None


def test_unsubscribing_twice_keeps_the_first_time(user: User) -> None:
    one_click(unsubscribe_url(user.pk))
    first = EmailPreference.objects.get(user=user).unsubscribed_at

    status, page = one_click(unsubscribe_url(user.pk))

    assert status == 200 and "You are unsubscribed" in page
    assert EmailPreference.objects.get(user=user).unsubscribed_at == first


def test_opening_the_link_asks_and_changes_nothing(client: Client, user: User) -> None:
    queued = make_email(user)

    response = client.get(urlsplit(unsubscribe_url(user.pk)).path)

    assert response.status_code == 200
    page = response.content.decode()
    assert "<h1>Unsubscribe from your coach" in page
    assert f'<form method="post" action="{urlsplit(unsubscribe_url(user.pk)).path}"' in page
    assert not EmailPreference.objects.filter(user=user, unsubscribed_at__isnull=False).exists()
    assert Email.objects.get(pk=queued.pk).status == "queued"


def test_only_one_persons_emails_stop(user: User, other_user: User) -> None:
    one_click(unsubscribe_url(user.pk))

    assert not EmailPreference.objects.filter(user=other_user, unsubscribed_at__isnull=False).exists()


@pytest.mark.parametrize(
    "token",
    ["1:not-a-signature", "nonsense", f"{unsubscribe_token(1)[:-2]}xx"],
    ids=["wrong signature", "no signature", "tampered"],
)
def test_a_link_that_was_not_made_by_us_is_a_clear_400(client: Client, token: str) -> None:
    for response in (client.get(f"/emails/unsubscribe/{token}/"), client.post(f"/emails/unsubscribe/{token}/")):
        assert response.status_code == 400
        assert "This unsubscribe link does not work" in response.content.decode()


def test_a_token_names_its_person_and_another_persons_id_is_not_forgeable(user: User, other_user: User) -> None:
    token = unsubscribe_token(user.pk)

    assert user_id_from_token(token) == user.pk
    assert user_id_from_token(token.replace(f"{user.pk}:", f"{other_user.pk}:", 1)) is None


def test_the_link_of_an_erased_account_still_answers_kindly(user: User) -> None:
    url = unsubscribe_url(user.pk)
    user.delete()

    status, page = one_click(url)

    assert status == 200 and "You are unsubscribed" in page
    assert not EmailPreference.objects.exists()


def test_other_methods_are_refused(client: Client, user: User) -> None:
    assert client.put(urlsplit(unsubscribe_url(user.pk)).path).status_code == 405


def test_the_unsubscribe_time_is_when_the_click_came(user: User) -> None:
    before = timezone.now()

    one_click(unsubscribe_url(user.pk))

    assert before <= EmailPreference.objects.get(user=user).unsubscribed_at <= timezone.now()
