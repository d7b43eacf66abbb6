"""Every response carries a strict Content-Security-Policy with a fresh nonce."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from accounts.models import User

NONCE = re.compile(r"'nonce-([^']+)'")


def policy_of(response) -> dict[str, list[str]]:
    header = response.headers["Content-Security-Policy"]
    return {part.split()[0]: part.split()[1:] for part in header.split("; ")}


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/accounts/login/", "/accounts/signup/", "/healthz", "/no-such-page/"])
def test_every_response_carries_the_policy_with_a_fresh_nonce(client: Client, path: str) -> None:
    first, second = client.get(path), client.get(path)

    nonces = [NONCE.search(r.headers["Content-Security-Policy"]).group(1) for r in (first, second)]
    assert nonces[0] != nonces[1]


@pytest.mark.django_db
def test_the_policy_allows_only_self_and_the_nonce(client: Client, user: User) -> None:
    client.force_login(user)
    policy = policy_of(client.get("/"))

    assert policy["default-src"] == ["'self'"]
    assert policy["script-src"][0] == "'self'" and policy["script-src"][1].startswith("'nonce-")
    assert policy["frame-ancestors"] == ["'none'"]
    assert policy["object-src"] == ["'none'"]
    header = " ".join(" ".join(values) for values in policy.values())
    assert "unsafe-inline" not in header and "unsafe-eval" not in header


@pytest.mark.django_db
def test_every_script_on_a_page_carries_that_responses_nonce(client: Client, user: User) -> None:
    client.force_login(user)
    response = client.get("/")
    nonce = NONCE.search(response.headers["Content-Security-Policy"]).group(1)
    scripts = re.findall(r"<script[^>]*>", response.content.decode())

    assert scripts
    assert all(f'nonce="{nonce}"' in tag for tag in scripts)
