"""Account mail (confirmation, password reset, security notices) speaks as the product: its
name and domain, a text part and an HTML part, links on SITE_URL whatever host was asked;
and confirming an address that also signs the person in says so in one message."""

from __future__ import annotations

import email
import email.policy
import re
from datetime import datetime
from email.message import EmailMessage
from html import unescape
from zoneinfo import ZoneInfo

import pytest
from allauth.account.adapter import get_adapter
from allauth.core.context import request_context
from django.contrib.auth.models import AnonymousUser
from django.contrib.messages.storage.fallback import FallbackStorage
from django.contrib.sessions.backends.base import SessionBase
from django.core import mail
from django.test import Client, RequestFactory
from django.utils import timezone

from accounts.models import User
from emails.outbox import mail_send_due
from tests.conftest import PASSWORD, make_user
from tests.emails.smtp_sink import SmtpSink

pytestmark = pytest.mark.django_db

SITE_URL = "https://coach.example.com"
NEW_PASSWORD = "a new and longer passphrase 42"
LINK = re.compile(r"https?://[^/\s]+(/accounts/confirm-email/\S+/)")


@pytest.fixture(autouse=True)
def _site(settings) -> None:
    settings.SITE_NAME = "Coach"
    settings.SITE_URL = SITE_URL


def sign_up(client: Client, address: str = "new@example.com") -> None:
    # Followed, as a browser does: the page it lands on shows "We're sending a confirmation".
    client.post("/accounts/signup/", {"email": address, "password1": PASSWORD, "password2": PASSWORD}, follow=True)
    mail_send_due()


def html_of(message) -> str:
    [(html, mimetype)] = message.alternatives
    assert mimetype == "text/html"
    return html


def shown_messages(html: str) -> list[str]:
    found = re.findall(r'<li class="message[^"]*">(.*?)</li>', html, re.S)
    return [unescape(re.sub(r"\s+", " ", text).strip()) for text in found]


def test_the_sign_up_mail_names_the_product_and_its_domain_not_the_host_asked() -> None:
    sign_up(Client(HTTP_HOST="127.0.0.1:8000"))

    [message] = mail.outbox
    assert message.subject == "Coach: Confirm your email address"
    assert message.body.startswith("Hello,\n\nWelcome to Coach. Please confirm that new@example.com is your address")
    assert message.body.endswith("-- \nCoach · https://coach.example.com")
    assert "127.0.0.1" not in message.body + message.subject + html_of(message)
    assert "Hello from" not in message.body and "example.com!" not in message.body
    link = LINK.search(message.body).group(0)
    assert link.startswith("https://coach.example.com/accounts/confirm-email/")
    assert f'href="{link}"' in html_of(message)


def test_the_site_name_is_a_setting(settings) -> None:
    settings.SITE_NAME = "Stride"

    sign_up(Client())

    [message] = mail.outbox
    assert message.subject == "Stride: Confirm your email address"
    assert "Welcome to Stride." in message.body and "Welcome to Stride." in html_of(message)
    assert ">Stride</a>" in html_of(message)


def test_the_html_part_reaches_the_smtp_server_beside_the_text_part(smtp_sink: SmtpSink, monkeypatch) -> None:
    received: list[bytes] = []
    keep = smtp_sink.handle_DATA

    async def keep_raw(server, session, envelope):
        received.append(envelope.content)
        return await keep(server, session, envelope)

    # Each SMTP connection looks the handler's hook up afresh: this one sees the raw bytes.
    monkeypatch.setattr(smtp_sink, "handle_DATA", keep_raw)

    sign_up(Client())

    [raw] = received
    headers = raw.split(b"\r\n\r\n", 1)[0]
    assert re.search(rb"^Content-Type: multipart/alternative;", headers, re.M | re.I)
    assert re.search(rb"^Subject: Coach: Confirm your email address\r?$", headers, re.M)
    parsed = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(parsed, EmailMessage)
    parts = [part.get_content_type() for part in parsed.iter_parts()]
    assert parts == ["text/plain", "text/html"]
    text = parsed.get_body(("plain",)).get_content()
    html = parsed.get_body(("html",)).get_content()
    link = LINK.search(text).group(0)
    assert link.startswith(SITE_URL)
    assert html.lstrip().startswith("<!DOCTYPE html>")
    assert f'<a href="{link}"' in html and "Confirm my address" in html


def test_an_unverified_person_signing_in_gets_a_fresh_confirmation_in_the_same_voice() -> None:
    make_user("late@example.com", verified=False)

    Client().post("/accounts/login/", {"login": "late@example.com", "password": PASSWORD})
    mail_send_due()

    [message] = mail.outbox
    assert message.subject == "Coach: Confirm your email address"
    assert "Please confirm that late@example.com is your address for Coach by opening this link:" in message.body
    assert LINK.search(message.body).group(0).startswith(SITE_URL)


def test_a_password_reset_link_is_on_the_site_whatever_host_was_asked(user: User) -> None:
    Client(HTTP_HOST="localhost").post("/accounts/password/reset/", {"email": user.email})
    mail_send_due()

    [message] = mail.outbox
    assert message.subject == "Coach: Reset your password"
    link = re.search(r"\S+/accounts/password/reset/key/\S+/", message.body).group(0)
    assert link.startswith("https://coach.example.com/accounts/password/reset/key/")
    assert f'href="{link}"' in html_of(message) and "Choose a new password" in html_of(message)
    assert "your password stays as it is" in message.body


def test_a_reset_for_an_address_with_no_account_says_so_and_offers_to_sign_up() -> None:
    Client().post("/accounts/password/reset/", {"email": "stranger@example.com"})
    mail_send_due()

    [message] = mail.outbox
    assert message.subject == "Coach: There is no account with this address"
    assert "https://coach.example.com/accounts/signup/" in message.body
    assert 'href="https://coach.example.com/accounts/signup/"' in html_of(message)


def test_signing_up_again_with_a_known_address_points_to_the_password_reset(user: User) -> None:
    sign_up(Client(), user.email)

    [message] = mail.outbox
    assert message.subject == "Coach: You already have an account"
    assert "https://coach.example.com/accounts/password/reset/" in message.body


def test_a_password_change_notice_says_when_in_the_persons_own_time_zone(user: User) -> None:
    user.name = "Ada"
    user.time_zone = "Pacific/Chatham"
    user.save()
    client = Client(HTTP_USER_AGENT="Firefox on a shared laptop")
    client.force_login(user)

    changed = client.post(
        "/accounts/password/change/",
        {"oldpassword": PASSWORD, "password1": NEW_PASSWORD, "password2": NEW_PASSWORD},
    )
    now = timezone.now()
    mail_send_due()

    assert changed.status_code == 302
    [message] = mail.outbox
    assert message.subject == "Coach: Your password was changed"
    assert message.body.startswith("Hi Ada,\n\nThe password of your Coach account was changed.")
    when = re.search(r"This happened on (.+?) \(Pacific/Chatham\), from a browser at 127\.0\.0\.1", message.body)
    stated = datetime.strptime(when.group(1), "%d %B %Y at %H:%M").replace(tzinfo=ZoneInfo("Pacific/Chatham"))
    assert abs((stated - now).total_seconds()) < 120
    assert "(Firefox on a shared laptop)" in message.body
    assert "https://coach.example.com/accounts/password/reset/" in message.body
    assert "Reset my password" in html_of(message) and "(Pacific/Chatham)" in html_of(message)


# Every mail allauth can send, with what allauth puts in its context.
EVERY_MAIL = {
    "account/email/email_confirmation_signup": {"activate_url": "http://testserver/accounts/confirm-email/k/"},
    "account/email/email_confirmation": {"activate_url": "http://testserver/accounts/confirm-email/k/"},
    "account/email/password_reset_key": {"password_reset_url": "http://testserver/accounts/password/reset/key/1-k/"},
    "account/email/password_reset_code": {"code": "ABC123"},
    "account/email/login_code": {"code": "XYZ789"},
    "account/email/unknown_account": {"signup_url": "http://testserver/accounts/signup/"},
    "account/email/account_already_exists": {
        "signup_url": "http://testserver/accounts/signup/",
        "password_reset_url": "http://testserver/accounts/password/reset/",
    },
}
EVERY_NOTICE = {
    "account/email/email_confirm": {"email": "ada@example.com"},
    "account/email/email_changed": {"from_email": "ada@example.com", "to_email": "ada@new.example.com"},
    "account/email/email_deleted": {"deleted_email": "old@example.com"},
    "account/email/password_changed": {},
    "account/email/password_reset": {},
    "account/email/password_set": {},
    # The second factor's notices (staff have one), in the same voice.
    "mfa/email/totp_activated": {},
    "mfa/email/totp_deactivated": {},
    "mfa/email/recovery_codes_generated": {},
    "mfa/email/webauthn_added": {},
    "mfa/email/webauthn_removed": {},
}
# What each of the second factor's notices says happened, in its text and its HTML alike.
NOTICE_SAYS = {
    "mfa/email/totp_activated": "An authenticator app was set up as the second step of signing in",
    "mfa/email/totp_deactivated": "signing in no longer asks for its code",
    "mfa/email/recovery_codes_generated": "New recovery codes were made",
    "mfa/email/webauthn_added": "A security key was added to your",
    "mfa/email/webauthn_removed": "A security key was removed from your",
}


def a_request(user: User | None = None):
    request = RequestFactory().get("/", HTTP_HOST="testserver")
    request.user = user or AnonymousUser()
    request.session = SessionBase()
    request._messages = FallbackStorage(request)
    return request


def assert_in_the_products_voice(message) -> None:
    html = html_of(message)
    assert message.subject.startswith("Coach: ")
    assert "testserver" not in message.body + html, "links are on SITE_URL"
    assert "{{" not in message.body + html and "{%" not in message.body + html
    assert "Hello from" not in message.body and "Thank you for using" not in message.body
    assert message.body.endswith("Coach · https://coach.example.com")
    assert ">Coach</a>" in html and ">coach.example.com</a>" in html


@pytest.mark.parametrize("prefix", EVERY_MAIL)
def test_every_account_mail_has_both_parts_in_the_products_voice(prefix: str, user: User) -> None:
    with request_context(a_request()):
        get_adapter().send_mail(prefix, user.email, {"user": user, **EVERY_MAIL[prefix]})
    mail_send_due()

    [message] = mail.outbox
    assert_in_the_products_voice(message)
    context = EVERY_MAIL[prefix]
    for value in ("ABC123", "XYZ789"):
        if value in context.values():
            assert f"\n\n{value}\n\n" in message.body and value in html_of(message)


@pytest.mark.parametrize("prefix", EVERY_NOTICE)
def test_every_security_notice_has_both_parts_and_says_what_to_do_if_it_was_not_you(prefix: str, user: User) -> None:
    with request_context(a_request(user)):
        get_adapter().send_notification_mail(prefix, user, EVERY_NOTICE[prefix])
    mail_send_due()

    [message] = mail.outbox
    assert_in_the_products_voice(message)
    assert "If it wasn't, reset your password now:\nhttps://coach.example.com/accounts/password/reset/" in message.body
    for value in [*EVERY_NOTICE[prefix].values(), *([NOTICE_SAYS[prefix]] if prefix in NOTICE_SAYS else [])]:
        assert value in message.body and value in html_of(message)


def test_confirming_the_address_says_confirmed_and_signed_in_in_one_message() -> None:
    client = Client()
    sign_up(client)
    link = LINK.search(mail.outbox[0].body).group(1)

    response = client.post(link, follow=True)

    assert response.redirect_chain[-1][0] == "/welcome/"
    assert shown_messages(response.content.decode()) == [
        "Your address new@example.com is confirmed, and you are signed in."
    ]


def test_confirming_in_another_browser_says_confirmed_then_signing_in_says_signed_in() -> None:
    sign_up(Client())
    link = LINK.search(mail.outbox[0].body).group(1)
    elsewhere = Client()

    confirmed = elsewhere.post(link, follow=True)
    signed_in = elsewhere.post("/accounts/login/", {"login": "new@example.com", "password": PASSWORD}, follow=True)

    assert shown_messages(confirmed.content.decode()) == ["Your address new@example.com is confirmed."]
    assert shown_messages(signed_in.content.decode()) == ["You are signed in as new@example.com."]


def test_signing_out_and_changing_the_password_each_leave_one_message(user: User) -> None:
    client = Client()
    client.force_login(user)

    changed = client.post(
        "/accounts/password/change/",
        {"oldpassword": PASSWORD, "password1": NEW_PASSWORD, "password2": NEW_PASSWORD},
        follow=True,
    )
    signed_out = client.post("/accounts/logout/", follow=True)

    assert shown_messages(changed.content.decode()) == ["Your password is changed."]
    assert shown_messages(signed_out.content.decode()) == ["You are signed out."]
