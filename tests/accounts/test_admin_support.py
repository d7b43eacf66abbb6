"""The admin as support staff use it: a person found by address or id, and from their page
one click to everything the app keeps about them, in staff wording."""

from __future__ import annotations

import re

import pytest
from django.db.models import Q
from django.test import Client

from accounts.models import User
from emails.models import Email
from tests.accounts.staff import staff_client
from tests.coach.factories import make_session
from tests.emails.factories import make_email
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db


@pytest.fixture
def support(db: None) -> Client:
    return staff_client(User.objects.create_superuser("support@example.com", "a-long-admin-password"))


def links_on(html: str) -> dict[str, str]:
    return {
        text.split(" (")[0]: href.replace("&amp;", "&")
        for href, text in re.findall(r'<a href="([^"]+)">([^<]+)</a>', html)
    }


def result_rows(html: str) -> int:
    table = html.split('id="result_list"', 1)[1].split("</table>", 1)[0]
    return table.count("<tr") - 1


def test_from_a_persons_page_one_click_reaches_each_of_their_memories_conversations_and_emails(
    support: Client, user: User, other_user: User
) -> None:
    make_memory(user, "oats", summary="Oats every morning")
    make_memory(user, "knee", source="user", category="injury")
    make_memory(other_user, "tea")
    make_session(user, "Hello", "Hi Ada")
    make_session(other_user, "Hello", "Hi Grace")
    make_email(user, status="sent")
    make_email(other_user, status="sent")

    page = support.get(f"/admin/accounts/user/{user.pk}/change/").content.decode()
    links = links_on(page.split("What the app keeps about this person", 1)[1])

    for label, rows in {"memories": 2, "conversations": 1, "emails": 1, "messages": 2}.items():
        listed = support.get(links[label])
        assert listed.status_code == 200, label
        html = listed.content.decode()
        assert result_rows(html) == rows, label
        assert "grace@example.com" not in html.split('id="result_list"', 1)[1], label


def test_a_number_finds_a_row_by_its_id_or_by_its_persons_id_and_an_address_by_email(
    support: Client, user: User, other_user: User
) -> None:
    mine = make_email(user, status="failed", error="SMTP 550: no such user")
    make_email(other_user, status="sent")

    by_person = support.get(f"/admin/emails/email/?q={user.pk}").content.decode()
    by_id = support.get(f"/admin/emails/email/?q=%23{mine.pk}").content.decode()
    by_address = support.get("/admin/accounts/user/?q=grace@").content.decode()

    assert result_rows(by_person) == Email.objects.filter(Q(user=user) | Q(pk=user.pk)).count()
    assert ">ada@example.com<" in by_id.split('id="result_list"', 1)[1]
    assert result_rows(by_address) == 1 and "grace@example.com" in by_address


def test_the_ledger_says_why_an_email_failed_in_the_list(support: Client, user: User) -> None:
    make_email(user, status="failed", error="SMTP 550: no such user")

    html = support.get("/admin/emails/email/").content.decode()

    assert "SMTP 550: no such user" in html.split('id="result_list"', 1)[1]


def test_each_app_is_one_section_named_in_staff_words(support: Client) -> None:
    html = support.get("/admin/").content.decode()
    sections = re.findall(r"<caption>\s*<a [^>]*>([^<]+)</a>", html)

    assert len(sections) == len(set(sections)), sections
    assert {"People", "Conversations", "Emails", "Memories"} <= set(sections)


def test_memory_filters_speak_of_the_person_not_to_them(support: Client, user: User) -> None:
    make_memory(user, "knee", source="onboarding", category="injury")

    html = support.get("/admin/memory/memory/").content.decode()
    filters = html.split('id="changelist-filter"', 1)[1]

    assert "the person, at onboarding" in filters and "the coach" in filters
    assert ">you<" not in filters and "your coach" not in filters
    assert "the person, at onboarding" in html.split('id="result_list"', 1)[1]
