"""The base layout every page shares."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client

from accounts.models import User

pytestmark = pytest.mark.django_db


def test_the_nav_offers_chat_memories_account_and_log_out(client: Client, user: User) -> None:
    client.force_login(user)
    html = client.get("/").content.decode()

    nav = re.search(r'<nav class="nav".*?</nav>', html, re.S).group(0)
    assert re.findall(r">\s*(Chat|Memories|Account|Log out)\s*<", nav) == ["Chat", "Memories", "Account", "Log out"]
    assert 'action="/accounts/logout/"' in nav and 'method="post"' in nav


def test_the_body_sends_the_csrf_token_with_every_htmx_request(client: Client, user: User) -> None:
    client.force_login(user)
    response = client.get("/")

    headers = json.loads(re.search(r"<body hx-headers='([^']+)'", response.content.decode()).group(1))
    assert headers["X-CSRFToken"]
    assert headers["X-CSRFToken"] != "NOTPROVIDED"


def test_htmx_is_served_from_our_own_static_files(client: Client) -> None:
    html = client.get("/accounts/login/").content.decode()

    assert re.search(r'<script src="/static/vendor/htmx/htmx-[\d.]+\.min\.js"', html)
    assert "://" not in "".join(re.findall(r'<script src="([^"]+)"', html))


@pytest.mark.parametrize("path", ["/memories/", "/account/"])
def test_pages_send_anonymous_visitors_to_log_in(client: Client, path: str) -> None:
    response = client.get(path)

    assert response.status_code == 302
    assert response.url.startswith("/accounts/login/")


@pytest.mark.parametrize("path", ["/", "/memories/", "/account/"])
def test_pages_answer_their_owner(client: Client, user: User, path: str) -> None:
    client.force_login(user)

    assert client.get(path).status_code == 200


def test_the_admin_is_at_admin(client: Client) -> None:
    response = client.get("/admin/")

    assert response.status_code == 302 and response.url.startswith("/admin/login/")
