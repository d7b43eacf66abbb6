"""The README's two screenshots, taken from the real app with the demo coach.

Starts the offline coach and one web process (development settings, against the
PostgreSQL and Redis bin/bench starts), signs a person in through the login form in
Chromium, has a short conversation with the demo coach, and saves the chat page and the
memory page as PNGs. Run it again after changing a page, and commit the images:

    bin/bench screenshots [--out docs/images]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.setup import django_for_benchmarks
from bench.web_app import free_port
from tests.chromium import CHROMIUM_ARGS, CHROMIUM_PATH

REPO = Path(__file__).resolve().parent.parent
EMAIL = "maya@example.com"
PASSWORD = "screenshot-password-1"  # noqa: S105 - a throwaway database's only person
# What the person tells the coach: a safety fact, an intention with a date, then a
# question the coach answers from what it kept.
MESSAGES = (
    "I have a bad left shoulder from climbing last year.",
    "I'm giving a talk at work in June and I get nervous.",
    "Can I still train for the half marathon this spring?",
)
VIEWPORT = {"width": 1200, "height": 800}
MEMORY_PAGE_VIEWPORT = {"width": 1200, "height": 1250}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "images")
    options = parser.parse_args()

    coach_port, web_port = free_port(), free_port()
    offline_url = f"http://127.0.0.1:{coach_port}/v1"
    os.environ |= {
        "OFFLINE_COACH_URL": offline_url,
        "OPENAI_API_KEY": "",
        "OPENAI_BASE_URL": "",
        "SITE_URL": f"http://127.0.0.1:{web_port}",
        "ALLOWED_HOSTS": "127.0.0.1",
    }
    django_for_benchmarks()
    person_made()

    coach = subprocess.Popen([sys.executable, "-m", "offline_coach", "--port", str(coach_port)], env=os.environ)
    web = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "coach.wiring.asgi:application",
            "--port",
            str(web_port),
            "--log-level",
            "warning",
        ],
        env=os.environ,
    )
    try:
        answering(f"http://127.0.0.1:{web_port}/healthz")
        answering(f"{offline_url}/models")
        options.out.mkdir(parents=True, exist_ok=True)
        photographed(f"http://127.0.0.1:{web_port}", options.out)
    finally:
        for process in (web, coach):
            process.terminate()
            process.wait(timeout=30)


def person_made() -> None:
    from allauth.account.models import EmailAddress
    from django.utils import timezone

    from accounts.models import User

    user = User.objects.create_user(EMAIL, PASSWORD, onboarded_at=timezone.now(), time_zone="Europe/London")
    User.objects.filter(pk=user.pk).update(name="Maya")
    EmailAddress.objects.create(user=user, email=EMAIL, primary=True, verified=True)


def answering(url: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not answer")


def photographed(site: str, out: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM_PATH, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport=VIEWPORT)
        page.goto(site + "/accounts/login/")
        page.get_by_label("Email:").fill(EMAIL)
        page.get_by_label("Password:").fill(PASSWORD)
        page.get_by_role("button", name="Sign In").click()
        expect(page.get_by_role("heading", name="Your coach")).to_be_visible()
        page.wait_for_load_state("load")
        for number, text in enumerate(MESSAGES, start=1):
            page.get_by_label("Message").fill(text)
            page.get_by_label("Message").press("Enter")
            expect(page.locator(".from-coach")).to_have_count(number, timeout=60_000)
            expect(page.locator(".from-coach").last).not_to_have_class(re.compile("streaming"), timeout=60_000)
            expect(page.locator("#send-button")).to_be_enabled(timeout=60_000)
        page.screenshot(path=out / "chat.png")
        # Taller, so both tiers of what was kept show.
        page.set_viewport_size(MEMORY_PAGE_VIEWPORT)
        page.goto(site + "/memories/")
        page.wait_for_load_state("load")
        page.screenshot(path=out / "memories.png")
        browser.close()
    print(f"saved {out / 'chat.png'} and {out / 'memories.png'}")


if __name__ == "__main__":
    main()
