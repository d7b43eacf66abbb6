"""The export in Chromium: what the person receives when they press "Download my data" is
one zip of the JSON and a page of it, whether or not the password has to be asked for
first; the page reads in the browser, offline, with nothing of the app's workings."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from django.test import Client
from playwright.sync_api import Page, expect

from accounts.models import User
from tests.conftest import PASSWORD, make_user
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def person(page: Page, live_server) -> User:
    """Signed in long enough ago that the export asks for the password again: force_login
    records no password, as a session older than the re-authentication window."""
    user = make_user("ada@example.com")
    make_memory(user, "left-shoulder", summary="Bad left shoulder")
    client = Client()
    client.force_login(user)
    page.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    return user


def unpacked(path: Path, into: Path) -> Path:
    """The one folder the downloaded zip holds, unpacked as the person would."""
    with zipfile.ZipFile(path) as archive:
        archive.extractall(into)
    [folder] = into.iterdir()
    return folder


def downloaded_json(path: Path, into: Path) -> dict:
    return json.loads((unpacked(path, into) / "your-data.json").read_text(encoding="utf-8"))


def test_download_my_data_asks_for_the_password_then_delivers_the_json_and_a_page_to_read(
    page: Page, live_server, person: User, tmp_path: Path
) -> None:
    page.goto(live_server.url + "/account/")
    page.get_by_role("link", name="Download my data").click()

    expect(page.get_by_role("heading", name="Confirm it\u2019s you")).to_be_visible()
    expect(page.get_by_role("main")).to_contain_text("Downloading your data")
    page.get_by_label("Password").fill(PASSWORD)
    with page.expect_download() as started:
        page.get_by_role("button", name="Confirm").click()

    download = started.value
    assert download.suggested_filename.startswith("coach-export-") and download.suggested_filename.endswith(".zip")
    folder = unpacked(Path(download.path()), tmp_path)
    data = json.loads((folder / "your-data.json").read_text(encoding="utf-8"))
    assert data["format"] == "coach-account-export"
    assert any(memory["summary"] == "Bad left shoulder" for memory in data["memories"])
    expect(page.locator("#export-status")).to_contain_text("Your download has started")

    # The page beside it, opened from the disk as the person would, offline.
    page.goto((folder / "your-data.html").as_uri())
    expect(page.get_by_role("heading", level=1)).to_contain_text("Your data from")
    expect(page.get_by_role("heading", name="Bad left shoulder")).to_be_visible()
    expect(page.get_by_role("main")).not_to_contain_text("left-shoulder")
    page.get_by_role("link", name="Memories (1)").click()
    expect(page.get_by_role("heading", name="Memories", exact=True)).to_be_in_viewport()


def test_a_second_download_soon_after_needs_no_password(page: Page, live_server, person: User, tmp_path: Path) -> None:
    page.goto(live_server.url + "/account/")
    page.get_by_role("link", name="Download my data").click()
    page.get_by_label("Password").fill(PASSWORD)
    with page.expect_download():
        page.get_by_role("button", name="Confirm").click()

    page.goto(live_server.url + "/account/")
    with page.expect_download() as again:
        page.get_by_role("link", name="Download my data").click()

    assert downloaded_json(Path(again.value.path()), tmp_path)["format"] == "coach-account-export"
