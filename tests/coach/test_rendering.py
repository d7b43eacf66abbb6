"""A link the model writes leaves the site only where the person can see: its full host
is shown beside it, and it carries rel="noopener noreferrer nofollow"."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import User
from tests.coach.factories import make_session

pytestmark = pytest.mark.django_db

LINK = "Read [your results](https://evil.example/?q=HIV-positive) first."


def test_a_model_written_link_shows_its_full_host_and_opens_nothing_of_ours(client: Client, user: User) -> None:
    session = make_session(user, "What does my test say?", LINK)
    client.force_login(user)

    page = client.get(f"/chat/{session.pk}/").content.decode()

    link = '<a href="https://evil.example/?q=HIV-positive" rel="noopener noreferrer nofollow">your results</a>'
    assert f'{link} <span class="link-host">(evil.example)</span>' in page


def test_a_look_alike_host_is_shown_as_it_is_spelled_for_the_network(client: Client, user: User) -> None:
    session = make_session(user, "Where do I sign in?", "Sign in at [apple](https://\u0430pple.com/login).")
    client.force_login(user)

    page = client.get(f"/chat/{session.pk}/").content.decode()

    assert '<span class="link-host">(xn--pple-43d.com)</span>' in page


def test_the_models_own_html_cannot_fake_the_host(client: Client, user: User) -> None:
    session = make_session(user, "Hi", 'Go <span class="link-host">(example.org)</span>')
    client.force_login(user)

    page = client.get(f"/chat/{session.pk}/").content.decode()

    assert '<span class="link-host">(example.org)</span>' not in page
