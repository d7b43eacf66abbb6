"""Links in a reply as Chromium reads them: every link the page holds goes where the host
shown beside it says, by the browser's own reading of its address, and an address the
browser would open somewhere else than it seems (or with no host to show) is no link."""

from __future__ import annotations

import pytest
from django.test import Client
from playwright.sync_api import Page

from tests.coach.factories import make_session
from tests.coach.test_rendering import NOT_LINKS
from tests.conftest import make_user

pytestmark = pytest.mark.django_db(transaction=True)

LINKS = [
    "https://evil.example/?q=HIV-positive",
    "HTTPS://EVIL.example:8443/x",
    "https://\u0430pple.com/login",
    "http://127.0.0.1/",
    "https://evil.example./trailing-dot",
]


def test_every_link_chromium_would_open_goes_where_its_shown_host_says(page: Page, live_app: str) -> None:
    person = make_user("ada@example.com")
    reply = "\n\n".join(f"Link {number}: [read this]({href})" for number, href in enumerate(LINKS + NOT_LINKS))
    session = make_session(person, "Where can I read more?", reply)
    client = Client()
    client.force_login(person)
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_app}])

    page.goto(f"{live_app}/chat/{session.pk}/")
    links = page.locator(".from-coach a").evaluate_all(
        """links => links.map(a => ({
            protocol: new URL(a.href).protocol,
            host: new URL(a.href).hostname,
            shown: a.nextElementSibling && a.nextElementSibling.matches('.link-host')
                ? a.nextElementSibling.textContent : null,
        }))"""
    )
    texts = page.locator(".from-coach .link-address").all_text_contents()

    assert len(links) == len(LINKS), "each web address is a link, and nothing else is"
    for link in links:
        assert link["protocol"] in ("http:", "https:")
        assert link["shown"] == f"({link['host']})", link
    assert len(texts) == len(NOT_LINKS)
