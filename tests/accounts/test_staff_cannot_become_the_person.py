"""Staff never act as the person (DESIGN.md section 8): no admin screen sets a person's
password or sign-in address; staff may send a reset link to the person's own address, and
every staff action on a person is recorded and shown to them on their memory page."""

from __future__ import annotations

import re
from html import unescape

import pytest
from allauth.account.models import EmailAddress
from django.test import Client

from accounts.models import User
from emails.models import OutgoingMail
from memory.models import PrivateTextViewing
from tests.accounts.staff import staff_client
from tests.accounts.test_admin_security import staff
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db

SUPPORT = ["accounts.view_user", "accounts.change_user", "memory.view_memory", "memory.change_memory"]
CHOSEN = "staff chose this password 123"


def change_form(person: User, **changes: str) -> dict[str, str]:
    form = {"name": person.name, "time_zone": person.time_zone, "is_active": "on", "memory_enabled": "on"}
    form |= {"last_login_0": "", "last_login_1": "", "date_joined_0": "2026-01-01", "date_joined_1": "10:00:00"}
    form |= {"onboarded_at_0": "", "onboarded_at_1": ""}
    form |= {"emailaddress_set-TOTAL_FORMS": "0", "emailaddress_set-INITIAL_FORMS": "0"}
    return form | changes


def test_staff_cannot_set_a_persons_password_through_the_admin(user: User) -> None:
    client = staff_client(staff(permissions=SUPPORT))
    url = f"/admin/accounts/user/{user.pk}/password/"

    shown = client.get(url)
    posted = client.post(url, {"password1": CHOSEN, "password2": CHOSEN, "usable_password": "true"})

    assert shown.status_code in (403, 404) and posted.status_code in (403, 404)
    user.refresh_from_db()
    assert user.check_password(PASSWORD) and not user.check_password(CHOSEN)
    assert url not in client.get(f"/admin/accounts/user/{user.pk}/change/").content.decode()
    assert Client().post("/accounts/login/", {"login": user.email, "password": CHOSEN}).status_code == 200


def test_staff_cannot_set_a_persons_sign_in_address(user: User) -> None:
    client = staff_client(staff(permissions=SUPPORT))
    page = f"/admin/accounts/user/{user.pk}/change/"
    [address] = EmailAddress.objects.filter(user=user)
    form = change_form(user, email="staff@evil.example", name="Renamed")
    form |= {"emailaddress_set-TOTAL_FORMS": "2", "emailaddress_set-INITIAL_FORMS": "1"}
    form |= {"emailaddress_set-0-id": str(address.pk), "emailaddress_set-0-user": str(user.pk)}
    form |= {"emailaddress_set-0-email": "staff@evil.example", "emailaddress_set-0-verified": "on"}
    form |= {"emailaddress_set-1-email": "second@evil.example", "emailaddress_set-1-verified": "on"}

    html = client.get(page).content.decode()
    client.post(page, form)

    assert 'name="email"' not in html and 'name="emailaddress_set-0-email"' not in html
    user.refresh_from_db()
    assert user.email == address.email
    assert list(EmailAddress.objects.filter(user=user).values_list("email", flat=True)) == [user.email]


def test_a_superuser_may_still_change_their_own_password() -> None:
    root = User.objects.create_superuser("root@example.com", PASSWORD)
    client = staff_client(root)
    url = f"/admin/accounts/user/{root.pk}/password/"

    assert client.get(url).status_code == 200
    client.post(url, {"password1": CHOSEN, "password2": CHOSEN, "usable_password": "true"})

    root.refresh_from_db()
    assert root.check_password(CHOSEN)


def test_staff_may_send_a_reset_link_to_the_persons_own_address_and_the_person_sees_it(user: User) -> None:
    member = staff(permissions=SUPPORT)
    client = staff_client(member)

    response = client.post(
        "/admin/accounts/user/", {"action": "send_password_reset_link", "_selected_action": [user.pk]}
    )

    assert response.status_code == 302
    [mail] = OutgoingMail.objects.all()
    assert mail.to == user.email and "/accounts/password/reset/key/" in mail.body_text
    [record] = PrivateTextViewing.objects.filter(person=user)
    assert (record.kind, record.viewer) == (PrivateTextViewing.Kind.ACTION, member)
    person = Client()
    person.force_login(user)
    shown = unescape(person.get("/memories/").content.decode())
    assert re.search(r"An administrator sent you a link to set a new password on \d{1,2} \w+", shown)


def test_every_staff_change_to_a_person_is_recorded_and_shown_to_them(user: User) -> None:
    member = staff(permissions=SUPPORT)
    client = staff_client(member)

    client.post(f"/admin/accounts/user/{user.pk}/change/", change_form(user, name="Sam"))

    user.refresh_from_db()
    assert user.name == "Sam"
    [record] = PrivateTextViewing.objects.filter(person=user)
    assert record.kind == PrivateTextViewing.Kind.ACTION and record.what == f"changed account {user.pk}"
    person = Client()
    person.force_login(user)
    assert f"An administrator changed account {user.pk} on" in unescape(person.get("/memories/").content.decode())
