"""The account page: email preferences, and deleting memories or the whole account behind
allauth's re-authentication."""

from __future__ import annotations

import io
import json
import re
import zipfile
from datetime import time, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import User
from emails.models import EmailPreference
from emails.planning import sending_window
from emails.selectors import next_nudge_for_user
from memory.models import Memory, MemoryEvent
from tests.accounts.staff import signed_in_just_now
from tests.coach.factories import make_session
from tests.conftest import PASSWORD
from tests.emails.factories import make_email, prefer
from tests.memory.factories import make_memories

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
PREFERENCES = {
    "frequency": "twice_weekly",
    "session_summaries": "on",
    "quiet_start": "22:30",
    "quiet_end": "07:00",
    "time_zone": "Europe/Helsinki",
}


@pytest.fixture
def client(client: Client, user: User) -> Client:
    client.force_login(user)
    return client


def reauthenticate(client: Client) -> None:
    response = client.post("/accounts/reauthenticate/", {"password": PASSWORD})
    assert response.status_code == 302


# Email preferences ----------------------------------------------------------------------


def test_the_account_page_says_when_the_next_note_comes_in_the_persons_own_time(client: Client, user: User) -> None:
    prefer(user, time_zone="Pacific/Chatham", quiet_start=time(23, 0), quiet_end=time(6, 0))
    make_session(user, "I ran 5k today", "Well done!")
    make_email(user, period_key="earlier", status="sent", sent_at=timezone.now() - timedelta(days=2))
    expected_before = next_nudge_for_user(user=user, now=timezone.now(), window=sending_window())

    html = client.get("/account/").content.decode()

    expected_after = next_nudge_for_user(user=user, now=timezone.now(), window=sending_window())
    shown = {
        f"{moment.astimezone(ZoneInfo('Pacific/Chatham')):%A %-d %B, %H:%M}"
        for moment in (expected_before, expected_after)
        if moment is not None
    }
    assert expected_after is not None and expected_after - timezone.now() > timedelta(days=3)
    assert any(f"Your next note from your coach: <strong>{text}</strong> your time" in html for text in shown)
    assert "(Pacific/Chatham)" in html


@pytest.mark.parametrize(
    ("fields", "chatted", "says"),
    [
        ({"frequency": "off"}, True, "You chose no notes between sessions."),
        ({"unsubscribed_at": timezone.now()}, True, "You unsubscribed, so your coach sends no notes."),
        ({}, False, "Your first note comes after your first conversation."),
    ],
)
def test_the_account_page_says_why_no_note_is_coming(
    client: Client, user: User, fields: dict, chatted: bool, says: str
) -> None:
    prefer(user, **fields)
    if chatted:
        make_session(user, "Hello", "Hi!")

    html = client.get("/account/").content.decode()

    assert says in html and "Your next note from your coach:" not in html


def test_the_account_page_shows_the_default_preferences_without_saving_them(client: Client, user: User) -> None:
    html = client.get("/account/").content.decode()

    assert 'value="21:00"' in html and 'value="08:00"' in html
    assert '<option value="UTC" selected>' in html
    assert not EmailPreference.objects.filter(user=user).exists()


def test_the_account_page_says_plainly_that_no_email_frequency_is_chosen_yet(client: Client, user: User) -> None:
    make_session(user, "Hello", "Hi!")

    html = client.get("/account/").content.decode()

    assert "You have not chosen how often your coach may email you yet, so it sends nothing until you do." in html
    assert re.findall(r'<input type="radio" name="frequency" value="(\w+)"', html) == ["weekly", "twice_weekly", "off"]
    assert "checked" not in html.split('id="id_frequency"')[1].split("</div>\n</div>")[0]
    assert "Your next note from your coach:" not in html


def test_saving_without_choosing_a_frequency_says_so_and_saves_nothing(client: Client, user: User) -> None:
    response = client.post(
        "/account/email-preferences", {k: v for k, v in PREFERENCES.items() if k != "frequency"}, headers=HTMX
    )

    assert "Choose how often your coach may write, or “No emails”." in response.content.decode()
    assert not EmailPreference.objects.filter(user=user).exists()


# The time-zone menu ----------------------------------------------------------------------


def test_the_time_zone_menu_groups_places_by_region_without_the_legacy_aliases(client: Client) -> None:
    html = client.get("/account/").content.decode()
    menu = html.split('name="time_zone"')[1].split("</select>")[0]

    regions = re.findall(r'<optgroup label="([^"]+)">', menu)
    assert regions == [
        "Africa",
        "America",
        "Antarctica",
        "Arctic",
        "Asia",
        "Atlantic",
        "Australia",
        "Europe",
        "Indian",
        "Pacific",
    ]
    values = re.findall(r'<option value="([^"]+)"', menu)
    assert values[0] == "UTC" and len(values) == len(set(values)) > 300
    assert all(value.split("/")[0] in regions for value in values[1:])
    for alias in ("US/Pacific", "Etc/GMT+3", "EST", "Asia/Calcutta", "Europe/Kiev", "GMT"):
        assert f'"{alias}"' not in menu
    # Readable city names, with the country, so "Norway" finds Oslo.
    assert '<option value="Pacific/Chatham">Chatham, New Zealand' in menu
    assert '<option value="Europe/Oslo">Oslo, Norway' in menu
    assert '<option value="America/Argentina/Buenos_Aires">Buenos Aires, Argentina' in menu
    assert '<option value="America/Indiana/Knox">Knox (Indiana), United States' in menu
    # Searchable: the menu carries the hook the search script looks for.
    assert "data-time-zone-picker" in html and "js/time_zone_picker" in html


def test_a_person_on_an_old_zone_name_still_finds_it_chosen(client: Client, user: User) -> None:
    User.objects.filter(pk=user.pk).update(time_zone="US/Pacific")

    html = client.get("/account/").content.decode()

    assert '<option value="US/Pacific" selected>US/Pacific' in html


def test_an_old_zone_name_sent_is_saved_as_the_place_it_stands_for(client: Client, user: User) -> None:
    client.post("/account/email-preferences", {**PREFERENCES, "time_zone": "US/Pacific"}, headers=HTMX)

    user.refresh_from_db()
    assert user.time_zone == "America/Los_Angeles"


def test_the_time_zone_menu_weighs_far_less_than_the_menu_of_every_zone_name_did(client: Client) -> None:
    # It was 35 KB of a 41 KB page: all 599 names the machine knows, one Django option
    # template (a line and its indentation) each.
    html = client.get("/account/").content

    menu = html.split(b'name="time_zone"')[1].split(b"</select>")[0]
    assert len(menu) < 24_000


def test_saving_preferences_stores_them(client: Client, user: User) -> None:
    response = client.post("/account/email-preferences", PREFERENCES, headers=HTMX)

    assert 'role="status">Saved.' in response.content.decode()
    preference = EmailPreference.objects.get(user=user)
    assert preference.frequency == "twice_weekly" and preference.session_summaries is True
    assert (preference.quiet_start, preference.quiet_end) == (time(22, 30), time(7, 0))
    # The time zone is the person's own, on their account.
    user.refresh_from_db()
    assert user.time_zone == "Europe/Helsinki"


def test_saving_preferences_again_updates_the_same_row(client: Client, user: User) -> None:
    client.post("/account/email-preferences", PREFERENCES, headers=HTMX)
    client.post("/account/email-preferences", {**PREFERENCES, "frequency": "off"}, headers=HTMX)

    assert EmailPreference.objects.get(user=user).frequency == "off"


def test_saving_preferences_without_htmx_goes_back_to_the_account_page(client: Client) -> None:
    response = client.post("/account/email-preferences", PREFERENCES)

    assert response.status_code == 302 and response.url == "/account/"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"time_zone": "Mars/Olympus_Mons"}, "is not a time zone we know"),
        ({"frequency": "hourly"}, "Select a valid choice"),
        ({"quiet_start": "08:00", "quiet_end": "08:00"}, "Quiet hours need an end different from their start."),
        ({"quiet_start": "25:00"}, "Enter a valid time."),
    ],
)
def test_invalid_preferences_say_what_is_wrong_and_save_nothing(
    client: Client, user: User, change: dict[str, str], message: str
) -> None:
    response = client.post("/account/email-preferences", {**PREFERENCES, **change}, headers=HTMX)

    html = response.content.decode()
    assert response.status_code == 200 and 'class="errorlist' in html and message in html
    assert not EmailPreference.objects.filter(user=user).exists()


# Export ---------------------------------------------------------------------------------


def test_the_export_is_one_zip_download_holding_the_json(client: Client, user: User) -> None:
    make_memories(user, 2)
    signed_in_just_now(client, user)

    response = client.get("/account/export")

    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"].startswith('attachment; filename="coach-export-')
    assert response["Content-Disposition"].endswith('.zip"')
    assert "no-store" in response["Cache-Control"] or "no-cache" in response["Cache-Control"]
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        [json_name] = [name for name in archive.namelist() if name.endswith("/your-data.json")]
        data = json.loads(archive.read(json_name))
    assert data["profile"]["email"] == user.email
    assert [m["key"] for m in data["memories"]] == ["note-0", "note-1"]


# Delete all memories --------------------------------------------------------------------


def test_deleting_all_memories_first_asks_for_the_password(client: Client, user: User) -> None:
    make_memories(user, 3)

    response = client.get("/account/delete-memories")

    assert response.status_code == 302
    assert response.url == "/accounts/reauthenticate/?next=%2Faccount%2Fdelete-memories"
    assert Memory.objects.filter(user=user).count() == 3


def test_a_post_to_delete_all_memories_without_the_password_deletes_nothing(client: Client, user: User) -> None:
    make_memories(user, 3)

    response = client.post("/account/delete-memories")

    assert response.url.startswith("/accounts/reauthenticate/")
    assert Memory.objects.filter(user=user).count() == 3


def test_a_wrong_password_deletes_nothing(client: Client, user: User) -> None:
    make_memories(user, 3)
    client.post("/account/delete-memories")

    response = client.post("/accounts/reauthenticate/?next=/account/delete-memories", {"password": "wrong"})

    assert response.status_code == 200
    assert Memory.objects.filter(user=user).count() == 3


def test_after_the_password_all_memories_and_their_history_go(client: Client, user: User) -> None:
    make_memories(user, 3)
    MemoryEvent.objects.create(user=user, key="note-0", actor="coach", action="created")
    reauthenticate(client)

    confirm = client.get("/account/delete-memories")
    response = client.post("/account/delete-memories", follow=True)

    assert "all 3 memories" in confirm.content.decode()
    assert response.redirect_chain == [("/memories/", 302)]
    assert "Deleted all 3 memories" in response.content.decode()
    assert not Memory.objects.filter(user=user).exists()
    assert not MemoryEvent.objects.filter(user=user).exists()


def test_the_password_given_after_pressing_delete_finishes_the_deletion(client: Client, user: User) -> None:
    make_memories(user, 3)
    client.post("/account/delete-memories")

    response = client.post("/accounts/reauthenticate/?next=/account/delete-memories", {"password": PASSWORD})

    assert response.status_code == 302
    assert not Memory.objects.filter(user=user).exists()


# Delete the account ---------------------------------------------------------------------


def test_deleting_the_account_first_asks_for_the_password(client: Client, user: User) -> None:
    response = client.get("/account/delete")

    assert response.status_code == 302
    assert response.url == "/accounts/reauthenticate/?next=%2Faccount%2Fdelete"
    assert 'name="password"' in client.get(response.url).content.decode()
    assert User.objects.filter(pk=user.pk).exists()


def test_after_the_password_the_account_is_deleted_and_the_person_logged_out(client: Client, user: User) -> None:
    reauthenticate(client)

    assert "This cannot be undone." in client.get("/account/delete").content.decode()
    response = client.post("/account/delete", follow=True)

    assert response.redirect_chain[0] == ("/accounts/login/", 302)
    assert "Your account and everything about you is deleted." in response.content.decode()
    assert not User.objects.filter(pk=user.pk).exists()
    assert client.get("/memories/").status_code == 302


def test_after_an_unsubscribe_the_account_page_says_so_and_emails_can_resume(client: Client, user: User) -> None:
    EmailPreference.objects.create(user=user, unsubscribed_at=timezone.now())

    assert "You unsubscribed on" in client.get("/account/").content.decode()
    response = client.post("/account/emails/resume", headers={"HX-Request": "true"})

    assert response.status_code == 200
    assert "Your coach may email you again." in response.content.decode()
    assert EmailPreference.objects.get(user=user).unsubscribed_at is None
    assert "You unsubscribed on" not in client.get("/account/").content.decode()


def test_the_note_under_the_data_actions_speaks_of_all_three_that_ask_for_the_password(
    client: Client, user: User
) -> None:
    client.force_login(user)

    page = client.get("/account/").content.decode()

    section = page[page.index('id="your-data"') :].split("</section>")[0]
    assert section.count('class="data-action"') == 3
    assert "Both ask" not in section and "Each asks for your password first" in section
