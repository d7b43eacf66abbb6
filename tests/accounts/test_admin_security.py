"""The admin as an attacker, or a curious staff member, meets it: signing in goes through
allauth (its rate limits) with a second factor, private text is shown only with a
permission and a stated reason (each reading recorded and shown to the person), staff
cannot raise their own rights, and what staff write is never the person's own."""

from __future__ import annotations

import logging
import re
from html import unescape
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone

from accounts.models import User
from coach.models import Message
from coach.streams import reply_key
from emails.models import Email
from infra.redis import redis_sync
from memory.context import assemble_memory_context
from memory.drafts import MemoryDraft
from memory.models import Memory, MemoryEvent, PrivateTextViewing
from memory.proposals import proposal_make
from tests.accounts.staff import code_now, staff_client, with_authenticator
from tests.coach.factories import make_session
from tests.conftest import PASSWORD, make_user
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db

MARKERS = ("qzkeymarker", "Qzsummarymarker", "Qzcontentmarker", "Qzsubjectmarker", "Qzbodymarker", "Qzproposalmarker")


def staff(email: str = "staff@example.com", *, permissions: list[str] | None = None) -> User:
    """A staff member with the given permissions ("app.codename"); every view and change
    permission of every model by default, but not the private-text one."""
    user = make_user(email)
    user.is_staff = True
    user.save()
    if permissions is None:
        chosen = Permission.objects.exclude(codename="view_private_text").filter(
            codename__regex=r"^(view|change|add|delete)_"
        )
    else:
        chosen = Permission.objects.filter(
            content_type__app_label__in=[p.split(".")[0] for p in permissions],
            codename__in=[p.split(".")[1] for p in permissions],
        )
    user.user_permissions.set(chosen)
    return user


def private_data(person: User) -> Memory:
    memory = make_memory(
        person, "qzkeymarker-note", summary="Qzsummarymarker about the knee", content="Qzcontentmarker details"
    )
    proposal_make(
        user=person,
        memory=memory,
        kind="update",
        draft=MemoryDraft(key=memory.key, tier="profile", category="injury", summary="Qzproposalmarker", content=""),
        reason="Qzproposalmarker reason",
    )
    Email.objects.create(
        user=person,
        kind="nudge",
        period_key="2026-W01",
        status="sent",
        subject="Qzsubjectmarker",
        body_text="Qzbodymarker",
    )
    return memory


# Signing in -------------------------------------------------------------------------------


def test_the_admin_signs_in_through_allauth_and_the_eleventh_failed_sign_in_is_refused() -> None:
    admin = User.objects.create_superuser("root@example.com", PASSWORD)
    client = Client()

    sent_to = client.get("/admin/", follow=True).redirect_chain[-1][0]
    assert urlsplit(sent_to).path == "/accounts/login/"

    for number in range(10):
        refused = client.post("/accounts/login/", {"login": f"guess{number}@example.com", "password": "wrong"})
        assert refused.status_code == 200 and b"Too many" not in refused.content
    eleventh = client.post("/accounts/login/", {"login": admin.email, "password": PASSWORD})

    assert b"Too many failed login attempts" in eleventh.content
    assert "_auth_user_id" not in client.session


def test_a_staff_member_without_a_second_factor_is_sent_to_set_one_up() -> None:
    member = staff()
    client = Client()
    client.force_login(member)

    response = client.get("/admin/", follow=True)

    # Setting one up asks for the password again first: this session's sign-in was a while ago.
    assert "/accounts/2fa/totp/activate/" in [urlsplit(url).path for url, _ in response.redirect_chain]
    assert b"The admin asks for a second factor" in response.content
    assert client.get("/admin/memory/memory/").status_code == 302


def test_a_staff_member_with_an_authenticator_gives_its_code_at_sign_in_then_enters() -> None:
    member = staff()
    secret = with_authenticator(member)
    client = Client()

    signed = client.post("/accounts/login/", {"login": member.email, "password": PASSWORD}, follow=True)
    assert urlsplit(signed.redirect_chain[-1][0]).path == "/accounts/2fa/authenticate/"
    assert client.get("/admin/").status_code == 302, "not in before the code"
    client.post("/accounts/2fa/authenticate/", {"code": code_now(secret)})

    assert client.get("/admin/").status_code == 200


# Rights -----------------------------------------------------------------------------------


def test_staff_cannot_make_themselves_superuser_or_touch_a_superuser() -> None:
    member = staff(permissions=["accounts.view_user", "accounts.change_user"])
    root = User.objects.create_superuser("root@example.com", PASSWORD)
    client = staff_client(member)
    form = {"email": member.email, "name": "", "is_active": "on", "is_staff": "on", "is_superuser": "on"}
    form |= {"last_login_0": "", "last_login_1": "", "date_joined_0": "2026-01-01", "date_joined_1": "10:00:00"}

    client.post(f"/admin/accounts/user/{member.pk}/change/", form)
    page = client.get(f"/admin/accounts/user/{member.pk}/change/").content.decode()

    member.refresh_from_db()
    assert not member.is_superuser and member.user_permissions.count() == 2
    assert 'name="is_superuser"' not in page
    assert client.post(f"/admin/accounts/user/{root.pk}/change/", {"email": "x@example.com"}).status_code == 403


# Private text -----------------------------------------------------------------------------


def test_staff_without_the_permission_see_no_private_text_on_any_admin_page(user: User) -> None:
    memory = private_data(user)
    client = staff_client(staff())

    seen = crawl(client, "/admin/")

    assert len(seen) > 25, "the crawl reached the lists, the detail pages and their histories"
    assert any(f"/admin/memory/memory/{memory.pk}/change/" in url for url in seen)
    assert any("/admin/memory/memoryevent/" in url and "/change/" in url for url in seen)
    assert any("/admin/emails/email/" in url and "/change/" in url for url in seen)
    for url, html in seen.items():
        for marker in MARKERS:
            assert marker.lower() not in html.lower(), f"{marker} shown at {url}"
    assert not PrivateTextViewing.objects.exists()


def test_reading_private_text_takes_a_reason_is_recorded_and_the_person_sees_it(user: User, client: Client) -> None:
    memory = private_data(user)
    member = staff(permissions=["memory.view_memory", "memory.view_private_text"])
    admin_client = staff_client(member)
    page = f"/admin/memory/memory/{memory.pk}/change/"

    asked = admin_client.get(page).content.decode()
    assert "Why do you need to read" in asked and "Qzcontentmarker" not in asked
    assert admin_client.post(page, {"private_text_reason": "support request"}).status_code == 302
    opened = admin_client.get(page).content.decode()

    assert "Qzcontentmarker details" in opened
    [viewing] = PrivateTextViewing.objects.all()
    assert (viewing.viewer, viewing.person, viewing.reason) == (member, user, "support request")
    assert viewing.what == f"memory {memory.pk}"
    client.force_login(user)
    shown = unescape(client.get("/memories/").content.decode())
    assert re.search(r"An administrator opened your memories on \d{1,2} \w+: support request", shown)


def test_a_memory_staff_add_is_never_the_persons_own_and_says_so(user: User) -> None:
    client = staff_client(User.objects.create_superuser("root@example.com", PASSWORD))
    form = {"user": user.pk, "key": "support-note", "tier": "profile", "category": "preference"}
    form |= {"summary": "Prefers morning sessions", "content": "Before work, at 7", "due_at_0": "", "due_at_1": ""}
    form["status"] = ""
    form["source"] = "user"  # not a field of the form: ignored

    assert client.post("/admin/memory/memory/add/", form).status_code == 302

    memory = Memory.objects.get(user=user)
    assert memory.source == "admin" and not memory.is_protected
    assert MemoryEvent.objects.get(memory_id=memory.pk).actor == "admin"
    context = assemble_memory_context(user=user, now=timezone.now()).text
    assert "- support-note (by support, " in context
    person = Client()
    person.force_login(user)
    assert "Added by our support team" in person.get("/memories/").content.decode()


def crawl(client: Client, start: str, *, limit: int = 400) -> dict[str, str]:
    """Every admin page reachable from `start` by links (GET only), with its HTML."""
    seen: dict[str, str] = {}
    queue = [start]
    while queue and len(seen) < limit:
        url = queue.pop(0)
        if url in seen:
            continue
        response = client.get(url)
        if response.status_code != 200 or "text/html" not in response.get("Content-Type", ""):
            seen[url] = ""
            continue
        html = response.content.decode()
        seen[url] = html
        for link in re.findall(r'href="(/admin/[^"#?]*)"', html):
            # Not signing out, not the password form; filters (query strings) add nothing.
            if "logout" not in link and "/password/" not in link and link not in seen:
                queue.append(unescape(link))
        for change in re.findall(r'href="(/admin/[^"]+/\d+/change/)"', html):
            # Each object's history and delete confirmation show it too.
            queue += [change.replace("/change/", "/history/"), change.replace("/change/", "/delete/")]
    return seen


def test_staff_deleting_a_person_erase_them_as_they_would_themselves(user: User) -> None:
    session = make_session(user, "I ran 5 km today", "Great work.")
    said = session.messages.get(role="user")
    Message.objects.filter(pk=said.pk).update(claimed_at=timezone.now())
    redis_sync().xadd(reply_key(said.pk), {"kind": "text", "data": '{"text": "Qzreplymarker"}'})
    other = make_user("other@example.com")
    client = staff_client(staff())

    single = client.post(f"/admin/accounts/user/{user.pk}/delete/", {"post": "yes"})
    bulk = client.post(
        "/admin/accounts/user/", {"action": "delete_selected", "_selected_action": [other.pk], "post": "yes"}
    )

    assert single.status_code == 302 and bulk.status_code == 302
    assert not User.objects.filter(pk__in=[user.pk, other.pk]).exists()
    assert not redis_sync().exists(reply_key(said.pk)), "their reply kept for a reload went with them"


def test_a_forbidden_admin_page_is_one_log_line_without_a_traceback(user: User, caplog) -> None:
    client = staff_client(staff(permissions=["memory.view_memory"]))

    with caplog.at_level(logging.INFO):
        response = client.get(f"/admin/accounts/user/{user.pk}/change/")

    assert response.status_code == 403
    [record] = [r for r in caplog.records if r.name.startswith("django")]
    assert record.getMessage().startswith("Forbidden") and not record.exc_info
    assert "Traceback" not in caplog.text
