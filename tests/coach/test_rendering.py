"""A link the model writes leaves the site only where the person can see: its full host
is shown beside it, and it carries rel="noopener noreferrer nofollow". Only an http or
https address with a plain host is a link; anything else is shown as text."""

from __future__ import annotations

import re
from html import unescape
from urllib.parse import urlsplit

import pytest
from django.test import Client
from hypothesis import given, settings
from hypothesis import strategies as st

from accounts.models import User
from coach.rendering import render_reply
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


# Only a web address with a host we show is a link ------------------------------------------

# Each written as a model might, and none a link: a browser opens the first as
# https://evil.example/, and the others go somewhere the words do not say, or nowhere a
# host could be shown for.
NOT_LINKS = [
    "https:evil.example/?q=HIV-positive",
    "https:/\\evil.example/?q=HIV-positive",
    "//evil.example/?q=HIV-positive",
    "mailto:help@evil.example?body=HIV-positive",
    "https://good.example\\@evil.example/",
    "https://good.example@evil.example/",
    "https://evil.example%2F@good.example/",
    "https://127.1/",
    "https://0x7f.1/",
    "ftp://evil.example/",
    "/admin/",
    "tel:+441234567890",
]


@pytest.mark.parametrize("href", NOT_LINKS)
def test_an_address_that_is_not_a_web_link_with_a_host_is_shown_as_text_and_links_nowhere(
    client: Client, user: User, href: str
) -> None:
    session = make_session(user, "Where are my results?", f"Read [your results]({href}) first.")
    client.force_login(user)

    page = client.get(f"/chat/{session.pk}/").content.decode()
    reply = page[page.index("Read your results") :][:400]

    assert "<a " not in reply.split("first.")[0]
    assert '<span class="link-address">(' in reply


def test_an_autolink_that_is_not_a_web_link_is_its_words_alone() -> None:
    assert render_reply("See <https:evil.example/x>.") == "<p>See https:evil.example/x.</p>"


def test_a_web_link_with_a_port_or_capitals_still_shows_its_host() -> None:
    html = render_reply("[a](HTTPS://EVIL.example:8443/x) and [b](https://127.0.0.1/)")

    assert '<span class="link-host">(evil.example)</span>' in html
    assert '<span class="link-host">(127.0.0.1)</span>' in html


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(list("ahtps:/\\@.%0x7f1-[]:?=#evil.exampleHIV ")), max_size=40),
    st.text(max_size=20),
)
def test_whatever_the_model_writes_every_link_is_a_web_address_followed_by_its_host(href: str, words: str) -> None:
    html = render_reply(f"[{words}]({href}) <{href}> {href}")

    for found in re.finditer(r'<a href="([^"]*)"[^>]*>.*?</a>( <span class="link-host">\(([^)<]*)\)</span>)?', html):
        target, shown = unescape(found.group(1)), found.group(3)
        assert target.lower().startswith(("http://", "https://")), html
        assert shown and shown == urlsplit(target).hostname, html
