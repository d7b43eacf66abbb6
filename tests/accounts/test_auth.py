"""Sign-up, verification, log-in and its rate limits, through allauth's real views."""

from __future__ import annotations

import re

import pytest
from django.core import mail
from django.test import Client

from accounts.models import User
from emails.outbox import mail_send_due
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db


def sign_up(client: Client, email: str) -> None:
    client.post("/accounts/signup/", {"email": email, "password1": PASSWORD, "password2": PASSWORD})
    # The page queues the mail; the outbox task sends it.
    mail_send_due()


def confirmation_link(message) -> str:
    return re.search(r"https?://[^/\s]+(/accounts/confirm-email/\S+/)", message.body).group(1)


def test_sign_up_sends_a_verification_email_and_does_not_log_in() -> None:
    client = Client()
    sign_up(client, "new@example.com")

    assert User.objects.filter(email="new@example.com").exists()
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["new@example.com"]
    assert "_auth_user_id" not in client.session


def test_an_unverified_address_cannot_log_in() -> None:
    sign_up(Client(), "new@example.com")
    client = Client()

    response = client.post("/accounts/login/", {"login": "new@example.com", "password": PASSWORD})

    assert response.status_code == 302 and "confirm-email" in response.url
    assert "_auth_user_id" not in client.session


def test_following_the_verification_link_then_logging_in_reaches_the_welcome_form() -> None:
    sign_up(Client(), "new@example.com")
    client = Client()
    link = confirmation_link(mail.outbox[0])

    assert client.post(link).status_code == 302
    client.post("/accounts/login/", {"login": "new@example.com", "password": PASSWORD})

    response = client.get("/")
    assert response.status_code == 302 and response.url == "/welcome/"
    assert b"Welcome" in client.get("/welcome/").content


def test_logging_in_with_a_wrong_password_is_rate_limited_per_address(user: User) -> None:
    client = Client()
    for _ in range(5):
        response = client.post("/accounts/login/", {"login": user.email, "password": "wrong"})
        assert response.status_code == 200

    blocked = client.post("/accounts/login/", {"login": user.email, "password": PASSWORD})

    assert blocked.status_code in (200, 429)
    assert b"Too many failed login attempts" in blocked.content
    assert "_auth_user_id" not in client.session


def test_sign_up_is_rate_limited_per_address_of_the_requester() -> None:
    client = Client()
    statuses = []
    for number in range(21):
        response = client.post(
            "/accounts/signup/",
            {"email": f"person{number}@example.com", "password1": PASSWORD, "password2": PASSWORD},
        )
        statuses.append(response.status_code)
        client.logout()

    assert statuses[-1] == 429
    assert User.objects.count() == 20


def test_password_reset_mails_a_link_to_a_known_address(user: User) -> None:
    Client().post("/accounts/password/reset/", {"email": user.email})
    mail_send_due()

    assert len(mail.outbox) == 1
    assert "/accounts/password/reset/key/" in mail.outbox[0].body


def test_logout_is_a_post(client: Client, user: User) -> None:
    client.force_login(user)

    client.post("/accounts/logout/")

    assert "_auth_user_id" not in client.session


@pytest.mark.django_db
def test_a_sign_up_error_sits_under_the_box_it_is_about_and_the_box_says_so() -> None:
    html = Client().post("/accounts/signup/", {"email": "not an address", "password1": "x", "password2": "x"}).content
    page = html.decode()

    label, box = page.index('for="id_email"'), page.index('id="id_email"')
    error = page.index("Enter a valid email address.")
    assert label < box < error
    tag = page[page.rindex("<input", 0, box) : page.index(">", box)]
    assert 'aria-invalid="true"' in tag and "id_email_error" in tag
    assert page.index('id="id_email_error"') < error < page.index('for="id_password1"')
