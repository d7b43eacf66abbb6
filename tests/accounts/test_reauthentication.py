"""A stolen session is not a stolen account: a new email address, a new password and the
export each ask for the password again, and the person is told by email of each change."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from allauth.account.models import EmailAddress
from django.core import mail
from django.test import Client

from accounts.models import User
from emails.outbox import mail_send_due
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "a different horse, staple and battery"


@pytest.fixture
def stolen(user: User) -> Client:
    """A session someone else got hold of: signed in, but not by giving the password now."""
    client = Client()
    client.force_login(user)
    return client


def asked_for_password(response) -> bool:
    return response.status_code == 302 and urlsplit(response.url).path == "/accounts/reauthenticate/"


def test_adding_an_email_address_asks_for_the_password_first(stolen: Client, user: User) -> None:
    attempt = stolen.post("/accounts/email/", {"action_add": "", "email": "thief@example.com"})

    assert asked_for_password(attempt)
    assert not EmailAddress.objects.filter(email="thief@example.com").exists()

    assert stolen.post("/accounts/reauthenticate/", {"password": PASSWORD}).status_code == 302
    stolen.post("/accounts/email/", {"action_add": "", "email": "second@example.com"})
    assert EmailAddress.objects.filter(user=user, email="second@example.com", verified=False).exists()


def test_changing_the_password_takes_the_current_one_and_the_person_is_told(stolen: Client, user: User) -> None:
    guess = {"oldpassword": "a guess", "password1": NEW_PASSWORD, "password2": NEW_PASSWORD}

    page = stolen.get("/accounts/password/change/").content.decode()
    refused = stolen.post("/accounts/password/change/", guess)

    assert 'name="oldpassword"' in page
    assert refused.status_code == 200
    user.refresh_from_db()
    assert user.check_password(PASSWORD)

    changed = stolen.post("/accounts/password/change/", {**guess, "oldpassword": PASSWORD})
    assert changed.status_code == 302
    user.refresh_from_db()
    assert user.check_password(NEW_PASSWORD)
    mail_send_due()
    [notice] = mail.outbox
    assert notice.to == [user.email] and "password" in notice.subject.lower()


def test_the_export_asks_for_the_password_first(stolen: Client) -> None:
    assert asked_for_password(stolen.get("/account/export"))

    stolen.post("/accounts/reauthenticate/", {"password": PASSWORD})
    response = stolen.get("/account/export")

    assert response.status_code == 200 and response["Content-Type"] == "application/zip"


def test_a_password_reset_for_an_address_nobody_has_is_limited_per_address() -> None:
    client = Client()
    for _ in range(3):
        assert client.post("/accounts/password/reset/", {"email": "nobody@example.com"}).status_code == 302

    fourth = client.post("/accounts/password/reset/", {"email": "nobody@example.com"})

    assert fourth.status_code == 429
    assert mail_send_due() == 3
