"""Rights in the admin: second factors are their owner's to change, and staff never gain a
permission through any admin screen. A superuser may remove a second factor or change who
holds which rights; each such change is recorded and shown to the person it touches."""

from __future__ import annotations

import json
import re
from html import unescape
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import pytest
from allauth.mfa.models import Authenticator
from allauth.mfa.recovery_codes.internal.auth import RecoveryCodes
from allauth.mfa.totp.internal.auth import generate_totp_secret
from django.conf import settings
from django.contrib.auth.models import Group, Permission
from django.test import Client

from accounts.models import User
from emails.models import OutgoingMail
from memory.models import PrivateTextViewing
from tests.accounts.staff import code_now, staff_client, with_authenticator
from tests.accounts.test_admin_security import crawl
from tests.conftest import PASSWORD, make_user

pytestmark = pytest.mark.django_db

PRIVATE_TEXT = "memory.view_private_text"


def staff_with_every_permission(email: str = "staff@example.com") -> User:
    """Staff holding every permission there is, the private-text one included: all that
    separates them from a superuser is the flag."""
    member = make_user(email)
    member.is_staff = True
    member.save()
    member.user_permissions.set(Permission.objects.all())
    return member


def permission(name: str) -> Permission:
    app_label, codename = name.split(".")
    return Permission.objects.get(content_type__app_label=app_label, codename=codename)


def shown_to(person: User) -> str:
    client = Client()
    client.force_login(person)
    return unescape(client.get("/memories/").content.decode())


def rights_form(person: User, **changes: object) -> dict[str, object]:
    """The person's change form in the admin, as a superuser sees it, with `changes`."""
    form: dict[str, object] = {
        "name": person.name,
        "time_zone": person.time_zone,
        "is_active": "on",
        "memory_enabled": "on",
        "last_login_0": "",
        "last_login_1": "",
        "date_joined_0": "2026-01-01",
        "date_joined_1": "10:00:00",
        "onboarded_at_0": "",
        "onboarded_at_1": "",
        "emailaddress_set-TOTAL_FORMS": "0",
        "emailaddress_set-INITIAL_FORMS": "0",
    }
    return form | changes


# Second factors ---------------------------------------------------------------------------


def test_staff_cannot_put_their_own_authenticator_on_a_superusers_account() -> None:
    root = User.objects.create_superuser("root@example.com", PASSWORD)
    member = staff_with_every_permission()
    client = staff_client(member)
    secret = generate_totp_secret()
    form = {"user": root.pk, "type": "totp", "data": json.dumps({"secret": secret}), "created_at_0": "2026-01-01"}
    form |= {"created_at_1": "10:00:00", "last_used_at_0": "", "last_used_at_1": ""}

    shown = client.get("/admin/mfa/authenticator/add/")
    posted = client.post("/admin/mfa/authenticator/add/", form)

    assert shown.status_code == 403 and posted.status_code == 403
    assert not Authenticator.objects.filter(user=root).exists()
    # And so the code from staff's own app does not pass root's second step.
    root_client = Client()
    root_client.post("/accounts/login/", {"login": root.email, "password": PASSWORD})
    root_client.post("/accounts/2fa/authenticate/", {"code": code_now(secret)})
    assert root_client.get("/admin/").status_code == 302


def test_staff_cannot_change_or_remove_anyones_second_factor(user: User) -> None:
    secret = with_authenticator(user)
    RecoveryCodes.activate(user)
    totp = Authenticator.objects.get(user=user, type="totp")
    client = staff_client(staff_with_every_permission())
    changed = {"user": user.pk, "type": "totp", "data": json.dumps({"secret": generate_totp_secret()})}

    attempts = [
        client.post(f"/admin/mfa/authenticator/{totp.pk}/change/", changed),
        client.post(f"/admin/mfa/authenticator/{totp.pk}/delete/", {"post": "yes"}),
        client.post(
            "/admin/mfa/authenticator/", {"action": "delete_selected", "_selected_action": [totp.pk], "post": "yes"}
        ),
    ]

    assert [attempt.status_code for attempt in attempts[:2]] == [403, 403]
    assert Authenticator.objects.filter(user=user).count() == 2
    totp.refresh_from_db()
    assert totp.wrap().validate_code(code_now(secret))
    assert not PrivateTextViewing.objects.exists()


def test_no_admin_page_shows_a_second_factors_secret(user: User) -> None:
    with_authenticator(user)
    RecoveryCodes.activate(user)
    client = staff_client(User.objects.create_superuser("root@example.com", PASSWORD))
    stored = [json.dumps(a.data) for a in Authenticator.objects.filter(user=user)]

    pages = [client.get("/admin/mfa/authenticator/").content.decode()]
    for authenticator in Authenticator.objects.filter(user=user):
        pages.append(client.get(f"/admin/mfa/authenticator/{authenticator.pk}/change/").content.decode())

    assert all('name="data"' not in page for page in pages)
    for data in stored:
        for value in re.findall(r'"([A-Za-z0-9+/=_-]{16,})"', data):
            assert all(value not in page for page in pages), "a stored secret is on an admin page"


def test_a_superuser_removing_a_second_factor_is_recorded_mailed_and_shown_to_the_person() -> None:
    member = staff_with_every_permission("lost-phone@example.com")
    with_authenticator(member)
    RecoveryCodes.activate(member)
    root = User.objects.create_superuser("root@example.com", PASSWORD)
    totp = Authenticator.objects.get(user=member, type="totp")

    response = staff_client(root).post(f"/admin/mfa/authenticator/{totp.pk}/delete/", {"post": "yes"})

    assert response.status_code == 302
    assert not Authenticator.objects.filter(user=member).exists(), "the recovery codes left with the app"
    [record] = PrivateTextViewing.objects.filter(person=member)
    assert (record.kind, record.viewer, record.what) == ("action", root, "removed your authenticator app")
    assert re.search(r"An administrator removed your authenticator app on \d{1,2} \w+", shown_to(member))
    [mail] = [mail for mail in OutgoingMail.objects.all() if mail.to == member.email]
    assert mail.subject == "Coach: An administrator removed your authenticator app"
    for part in (mail.body_text, unescape(mail.body_html)):
        assert "An administrator removed your authenticator app from your Coach account on" in part
        assert f"{settings.SITE_URL}/accounts/password/reset/" in part


# Groups and permissions -------------------------------------------------------------------


def test_staff_cannot_give_a_permission_to_a_group_they_are_in() -> None:
    member = staff_with_every_permission()
    member.user_permissions.remove(permission(PRIVATE_TEXT))
    support = Group.objects.create(name="Support")
    member.groups.add(support)
    client = staff_client(member)

    page = client.get(f"/admin/auth/group/{support.pk}/change/")
    posted = client.post(
        f"/admin/auth/group/{support.pk}/change/", {"name": "Support", "permissions": [permission(PRIVATE_TEXT).pk]}
    )

    assert page.status_code == 200 and 'name="permissions"' not in page.content.decode()
    assert posted.status_code == 403
    member = User.objects.get(pk=member.pk)
    assert not support.permissions.exists() and not member.has_perm(PRIVATE_TEXT)


def test_staff_cannot_add_or_delete_a_group() -> None:
    support = Group.objects.create(name="Support")
    support.permissions.add(permission(PRIVATE_TEXT))
    client = staff_client(staff_with_every_permission())

    added = client.post("/admin/auth/group/add/", {"name": "Mine", "permissions": [permission(PRIVATE_TEXT).pk]})
    deleted = client.post(f"/admin/auth/group/{support.pk}/delete/", {"post": "yes"})

    assert (added.status_code, deleted.status_code) == (403, 403)
    assert list(Group.objects.values_list("name", flat=True)) == ["Support"]


def test_staff_cannot_put_themselves_or_anyone_in_a_group_or_give_a_permission(user: User) -> None:
    support = Group.objects.create(name="Support")
    support.permissions.add(permission(PRIVATE_TEXT))
    member = staff_with_every_permission()
    member.user_permissions.remove(permission(PRIVATE_TEXT))
    client = staff_client(member)

    for person in (member, user):
        client.post(
            f"/admin/accounts/user/{person.pk}/change/",
            rights_form(person, groups=[support.pk], user_permissions=[permission(PRIVATE_TEXT).pk], is_staff="on"),
        )

    member = User.objects.get(pk=member.pk)
    user = User.objects.get(pk=user.pk)
    assert not member.has_perm(PRIVATE_TEXT) and not member.groups.exists()
    assert not user.is_staff and not user.groups.exists() and not user.user_permissions.exists()


def test_a_superuser_changing_someones_rights_is_recorded_and_shown_to_them(user: User) -> None:
    support = Group.objects.create(name="Support")
    root = User.objects.create_superuser("root@example.com", PASSWORD)
    client = staff_client(root)

    client.post(
        f"/admin/accounts/user/{user.pk}/change/",
        rights_form(user, is_staff="on", groups=[support.pk], user_permissions=[permission(PRIVATE_TEXT).pk]),
    )
    client.post(f"/admin/accounts/user/{user.pk}/change/", rights_form(User.objects.get(pk=user.pk)))

    said = set(PrivateTextViewing.objects.filter(person=user).values_list("what", flat=True))
    assert {
        "made you staff",
        "added you to the group Support",
        "gave you the permission to open a person's private text in the admin, giving a reason",
        "made you no longer staff",
        "took you out of the group Support",
        "took away your permission to open a person's private text in the admin, giving a reason",
    } <= said
    page = shown_to(user)
    assert re.search(r"An administrator added you to the group Support on \d{1,2} \w+", page)
    assert "An administrator took away your permission to open a person's private text" in page


def test_a_superuser_changing_a_groups_permissions_is_shown_to_each_of_its_members(user: User) -> None:
    support = Group.objects.create(name="Support")
    other = make_user("other@example.com")
    user.groups.add(support)
    other.groups.add(support)
    client = staff_client(User.objects.create_superuser("root@example.com", PASSWORD))

    given = {"name": "Support", "permissions": [permission(PRIVATE_TEXT).pk]}
    client.post(f"/admin/auth/group/{support.pk}/change/", given)
    client.post(f"/admin/auth/group/{support.pk}/delete/", {"post": "yes"})

    for person in (user, other):
        page = shown_to(person)
        assert "An administrator gave your group Support the permission to open a person's private text" in page
        assert "An administrator deleted your group Support" in page


# The crawl --------------------------------------------------------------------------------


class _Forms(HTMLParser):
    """Each form on a page: its method, where it posts, and the names of its fields."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[tuple[str, str, set[str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "form":
            self.forms.append(((named.get("method") or "get").lower(), named.get("action") or "", set()))
        elif tag in {"input", "select", "textarea", "button"} and self.forms and named.get("name"):
            self.forms[-1][2].add(named["name"] or "")


RIGHTS_FIELDS = {"is_superuser", "is_staff", "groups", "user_permissions", "permissions"}
PASSWORD_FIELDS = {"password", "password1", "password2", "usable_password", "old_password", "new_password1"}


def test_an_admin_crawl_by_staff_with_every_permission_finds_no_way_to_change_a_second_factor_a_right_or_a_password(
    user: User,
) -> None:
    with_authenticator(user)
    RecoveryCodes.activate(user)
    root = User.objects.create_superuser("root@example.com", PASSWORD)
    with_authenticator(root)
    Group.objects.create(name="Support").permissions.add(permission(PRIVATE_TEXT))
    member = staff_with_every_permission()
    client = staff_client(member)

    seen = crawl(client, "/admin/")

    assert any("/admin/mfa/authenticator/" in url and "/change/" in url for url in seen)
    assert any("/admin/auth/group/" in url and "/change/" in url for url in seen)
    for url, html in seen.items():
        parser = _Forms()
        parser.feed(html)
        for method, action, fields in parser.forms:
            target = urlsplit(urljoin(url, action or url)).path
            if method != "post":
                continue
            # (A list is a form with its token alone, and nothing to send: no action to choose.)
            assert not (target.startswith("/admin/mfa/") and fields - {"csrfmiddlewaretoken"}), (
                f"a form at {url} changes a second factor: {fields}"
            )
            assert not fields & RIGHTS_FIELDS, f"a form at {url} sets rights: {fields & RIGHTS_FIELDS}"
            if target not in ("/admin/accounts/user/add/", "/admin/password_change/"):
                # A new account's password is set where it is added, and the admin's own
                # form changes the staff member's own, given the old one: no one else's.
                assert not fields & PASSWORD_FIELDS, f"a form at {url} sets a password"
    for person in (user, root, member):
        for path in ("password/", "change/"):
            response = client.post(
                f"/admin/accounts/user/{person.pk}/{path}",
                {"password1": "staff chose this 123", "password2": "staff chose this 123", "usable_password": "true"},
            )
            assert response.status_code in (200, 302, 403, 404)
        person.refresh_from_db()
        assert person.check_password(PASSWORD), f"the password of {person.email} was changed"
    assert Authenticator.objects.filter(user__in=[user, root, member]).count() == 4
    member = User.objects.get(pk=member.pk)
    assert not member.is_superuser and not member.groups.exists()
