"""A visitor at `/` meets the product before any form: what the coach does, how it remembers
and forgets, what it promises about privacy, and the way in. A signed-in person still
goes straight to the chat."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from playwright.sync_api import Page, expect

from accounts.models import User
from tests.accessibility import assert_accessible
from tests.conftest import make_user

VIEWPORTS = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}


def text_of(html: str) -> str:
    without_tags = re.sub(r"<[^>]+>", " ", html)
    return re.sub(r"\s+", " ", without_tags)


@pytest.mark.django_db
def test_a_visitor_at_the_root_gets_the_landing_page_not_a_form(client: Client) -> None:
    response = client.get("/")

    assert response.status_code == 200
    html = response.content.decode()
    assert len(re.findall(r"<h1[\s>]", html)) == 1
    assert len(re.findall(r"<main[\s>]", html)) == 1 and "<header" in html
    assert "A coach that remembers you" in text_of(html)
    assert 'href="/accounts/signup/"' in html and 'href="/accounts/login/"' in html
    assert "<form" not in html.split("</header>", 1)[1], "the page itself asks for nothing"


@pytest.mark.django_db
def test_the_landing_page_says_what_is_kept_for_good_and_what_goes_first(client: Client, settings) -> None:
    settings.MEMORY_MAX_STORED = 45
    settings.MEMORY_MAX_EPISODES = 10
    settings.MEMORY_FORGOTTEN_DAYS = 21

    text = text_of(client.get("/").content.decode())

    kept = text.split("Kept for good", 1)[1].split("What goes first", 1)[0]
    assert "Anything you tell it to remember, or add yourself." in kept
    assert "your answers to the welcome questions" in kept
    assert "Injuries, allergies, medical facts and other safety notes, whoever wrote them down." in kept
    assert "Only you can delete them" in kept
    first = text.split("What goes first", 1)[1].split("Yours to see and change", 1)[0]
    assert "It keeps up to 45 notes in all" in first and "its own oldest notes" in first
    assert "yours never make way for its own" in first
    assert "keeps the latest 10" in first and "for 21 days, so you can bring it back" in first
    yours = text.split("Yours to see and change", 1)[1]
    assert "Correct one, delete one, or add one" in yours and "Export all of it" in yours


@pytest.mark.django_db
def test_the_landing_page_states_the_privacy_promises(client: Client) -> None:
    text = text_of(client.get("/").content.decode())

    privacy = text.split("What we promise about your privacy", 1)[1]
    assert "encrypted before they reach the database" in privacy
    assert "Each time is recorded and shown to you on your memory page" in privacy
    assert "no copy is kept in any history" in privacy
    assert "it sends that model the conversation and the notes it needs" in privacy


@pytest.mark.django_db
def test_the_landing_page_has_no_inline_style_or_script_and_no_outside_address(client: Client) -> None:
    response = client.get("/")
    html = response.content.decode()
    nonce = re.search(r"'nonce-([^']+)'", response.headers["Content-Security-Policy"]).group(1)

    assert " style=" not in html and "<style" not in html
    assert all(f'nonce="{nonce}"' in tag for tag in re.findall(r"<script[^>]*>", html))
    assert '<link rel="stylesheet" href="/static/css/landing.css">' in html
    assert not re.search(r'(?:src|href)="(?:https?:)?//', html)


def test_a_signed_in_person_at_the_root_still_goes_to_the_chat(client: Client, user: User) -> None:
    client.force_login(user)

    response = client.get("/")

    assert response.status_code == 200
    assert "coach/chat.html" in [template.name for template in response.templates]
    assert "A coach that remembers you" not in response.content.decode()


def test_someone_not_yet_onboarded_at_the_root_goes_to_the_welcome_questions(client: Client, db: None) -> None:
    client.force_login(make_user("fresh@example.com", onboarded=False))

    response = client.get("/")

    assert response.status_code == 302 and response.url == "/welcome/"


@pytest.mark.django_db
def test_the_root_takes_only_get(client: Client) -> None:
    assert client.post("/").status_code == 405


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("viewport", VIEWPORTS, ids=list(VIEWPORTS))
def test_the_landing_page_fits_the_screen_uses_only_the_sites_own_files_and_leads_in(
    page: Page, live_app: str, viewport: str
) -> None:
    page.set_viewport_size(VIEWPORTS[viewport])
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    csp: list[str] = []
    page.on("console", lambda message: csp.append(message.text) if "Content Security Policy" in message.text else None)

    page.goto(live_app + "/")
    page.wait_for_load_state("networkidle")

    expect(page.get_by_role("heading", level=1)).to_have_text(
        "A coach that remembers you, and shows you everything it remembers"
    )
    expect(page.get_by_role("main")).to_have_count(1)
    expect(page.get_by_role("banner")).to_have_count(1)
    assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORTS[viewport]["width"]
    # The page's own style sheet is applied (the cards sit in a grid).
    assert page.locator(".landing-cards").first.evaluate("el => getComputedStyle(el).display") == "grid"
    assert all(url.startswith(live_app) for url in requested), requested
    assert csp == []
    assert_accessible(page, f"the landing page ({viewport})")

    page.get_by_role("main").get_by_role("link", name="Create your account").first.click()
    expect(page.get_by_role("heading", name="Sign Up")).to_be_visible()
    page.go_back()
    page.get_by_role("main").get_by_role("link", name="Sign in").first.click()
    expect(page.get_by_role("heading", name="Sign In")).to_be_visible()


def test_the_landing_page_describes_itself_to_search_engines_and_link_previews(client: Client) -> None:
    html = client.get("/").content.decode()

    assert '<meta name="description" content="An AI coach that remembers' in html
