"""Sign-up without a detour, in Chromium: the link in the verification mail opens on the
address the run command prints, so the browser that signed up is signed in on confirming."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
from django.core import mail
from playwright.sync_api import Page, expect

from emails.outbox import mail_send_due
from tests.coach.wiring.test_settings import run_django
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)


def development_site_url(host: str, port: int) -> str:
    """SITE_URL as the app's own settings make it in development, for the HOST and PORT the
    run command serves on and hands its processes."""
    script = "import django; django.setup(); from django.conf import settings; print(settings.SITE_URL)"
    result = run_django(["-c", script], DJANGO_DEBUG="true", SITE_URL=None, HOST=host, PORT=str(port))
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_verification_link_signs_in_the_browser_that_signed_up(page: Page, live_app: str, settings) -> None:
    served = urlsplit(live_app)
    settings.SITE_URL = development_site_url(served.hostname, served.port)

    page.goto(live_app + "/accounts/signup/")
    page.get_by_label("Email:").fill("new@example.com")
    page.get_by_label("Password:", exact=True).fill(PASSWORD)
    page.get_by_label("Password (again):").fill(PASSWORD)
    page.get_by_role("button", name="Sign Up").click()
    mail_send_due()
    link = re.search(r"https?://\S+/accounts/confirm-email/\S+/", mail.outbox[-1].body).group(0)

    page.goto(link)
    page.get_by_role("button", name="Confirm").click()

    expect(page.get_by_role("heading", name="Welcome")).to_be_visible()
    expect(page.locator(".message")).to_have_text(["Your address new@example.com is confirmed, and you are signed in."])
