"""A visitor lands, signs up, verifies their address, logs in, sees the chat and logs out, in Chromium."""

from __future__ import annotations

import re

import pytest
from django.core import mail
from playwright.sync_api import Page, expect

from emails.outbox import mail_send_due
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)


def sign_up_and_confirm(page: Page, live_app: str, email: str) -> None:
    """From the sign-up form: the form sent, the verification mail's link followed and
    confirmed, ending on the welcome."""
    page.get_by_label("Email:").fill(email)
    page.get_by_label("Password:", exact=True).fill(PASSWORD)
    page.get_by_label("Password (again):").fill(PASSWORD)
    page.get_by_role("button", name="Sign Up").click()
    expect(page.get_by_role("heading", name="Verify Your Email Address")).to_be_visible()

    mail_send_due()
    link = re.search(r"https?://[^/\s]+(/accounts/confirm-email/\S+/)", mail.outbox[-1].body).group(1)
    page.goto(live_app + link)
    page.get_by_role("button", name="Confirm").click()
    expect(page.get_by_role("heading", name="Welcome")).to_be_visible()


def test_land_sign_up_verify_log_in_see_the_chat_and_log_out(page: Page, live_app: str) -> None:
    page.goto(live_app + "/")
    expect(page.get_by_role("heading", level=1)).to_contain_text("A coach that remembers you")
    page.get_by_role("main").get_by_role("link", name="Create your account").first.click()
    sign_up_and_confirm(page, live_app, "new@example.com")
    # One message, not "confirmed" and "signed in" stacked.
    expect(page.locator(".message")).to_have_text(["Your address new@example.com is confirmed, and you are signed in."])
    page.get_by_role("button", name="Skip for now").click()
    expect(page.get_by_role("heading", name="Your coach")).to_be_visible()

    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile(r"/accounts/login/|/$"))

    page.goto(live_app + "/")
    expect(page.get_by_role("heading", level=1)).to_contain_text("A coach that remembers you")
    page.get_by_role("main").get_by_role("link", name="Sign in").first.click()
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    page.get_by_label("Email:").fill("new@example.com")
    page.get_by_label("Password:").fill(PASSWORD)
    page.get_by_role("button", name="Sign In").click()
    expect(page.get_by_role("heading", name="Your coach")).to_be_visible()
    expect(page.get_by_role("navigation", name="Main")).to_contain_text("Memories")

    page.get_by_role("button", name="Log out").click()
    page.goto(live_app + "/")
    expect(page.get_by_role("heading", level=1)).to_contain_text("A coach that remembers you")
    expect(page.get_by_role("navigation", name="Main")).not_to_contain_text("Memories")


def test_pages_raise_no_content_security_policy_violations(page: Page, live_app: str) -> None:
    violations: list[str] = []
    page.on(
        "console",
        lambda message: violations.append(message.text) if "Content Security Policy" in message.text else None,
    )

    for path in ("/", "/accounts/login/", "/accounts/signup/", "/accounts/password/reset/"):
        page.goto(live_app + path)
        page.wait_for_load_state("networkidle")

    assert violations == []
    assert page.evaluate("typeof window.htmx") == "object"
