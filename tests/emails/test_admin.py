"""The email ledger in the admin: filtered by status and kind, searched by address, and
never showing what an email said in the list, nor letting anyone edit it by hand."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import User
from tests.accounts.staff import staff_client
from tests.conftest import make_user
from tests.emails.factories import make_email

pytestmark = pytest.mark.django_db

LEDGER = "/admin/emails/email/"


@pytest.fixture
def admin(db: None) -> Client:
    staff = make_user("admin@example.com")
    staff.is_staff = staff.is_superuser = True
    staff.save()
    return staff_client(staff)


@pytest.fixture
def ledger(user: User, other_user: User) -> None:
    make_email(user, period_key="2026-W47", status="sent", subject="Secret subject", body="Private body")
    make_email(user, kind="check_in", period_key="memory-1", status="failed", error="SMTP 550: no such user")
    make_email(other_user, period_key="2026-W47", status="skipped", error="they unsubscribed")
    make_email(other_user, period_key="2026-W48", status="sent_unconfirmed", error="it may have been delivered")


def test_the_ledger_is_listed_without_what_the_emails_said(admin: Client, ledger: None) -> None:
    response = admin.get(LEDGER)

    assert response.status_code == 200
    page = response.content.decode()
    assert "ada@example.com" in page and "grace@example.com" in page
    assert "Secret subject" not in page and "Private body" not in page


@pytest.mark.parametrize(
    ("query", "people"),
    [
        ("?status__exact=failed", ["ada@example.com"]),
        ("?status__exact=skipped", ["grace@example.com"]),
        ("?status__exact=sent_unconfirmed", ["grace@example.com"]),
        ("?kind__exact=check_in", ["ada@example.com"]),
        ("?kind__exact=nudge&status__exact=sent", ["ada@example.com"]),
        ("?q=grace", ["grace@example.com"]),
    ],
)
def test_the_ledger_filters_by_status_and_kind_and_searches_by_address(
    admin: Client, ledger: None, query: str, people: list[str]
) -> None:
    response = admin.get(LEDGER + query)

    result_list = response.content.decode().split('id="result_list"', 1)[1]
    assert [p for p in ("ada@example.com", "grace@example.com") if f">{p}<" in result_list] == people


def test_an_email_the_server_never_answered_is_listed_and_filtered_as_sent_unconfirmed(
    admin: Client, ledger: None
) -> None:
    page = admin.get(LEDGER).content.decode()
    filtered = admin.get(LEDGER + "?status__exact=sent_unconfirmed").content.decode()

    assert "Sent, unconfirmed" in page.split('id="changelist-filter"', 1)[1]
    rows = filtered.split('id="result_list"', 1)[1]
    assert rows.count('<td class="field-status">Sent, unconfirmed</td>') == 1


def test_an_email_opens_with_its_text_once_staff_say_why(admin: Client, user: User) -> None:
    email = make_email(user, status="sent", subject="Secret subject", body="Private body")
    change = f"{LEDGER}{email.pk}/change/"

    asked = admin.get(change).content.decode()
    admin.post(change, {"private_text_reason": "they asked why this email was sent"})
    page = admin.get(change).content.decode()

    assert "Secret subject" not in asked and "Private body" not in asked
    assert "Secret subject" in page and "Private body" in page


def test_no_one_adds_edits_or_deletes_a_ledger_row_by_hand(admin: Client, user: User) -> None:
    email = make_email(user)

    assert admin.get(f"{LEDGER}add/").status_code == 403
    assert admin.post(f"{LEDGER}{email.pk}/change/", {"status": "sent"}).status_code == 403
    assert admin.post(f"{LEDGER}{email.pk}/delete/", {"post": "yes"}).status_code == 403
