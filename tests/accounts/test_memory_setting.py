"""The memory switch on the account page, and what the memory page says while it is off."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import User
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
URL = "/account/memory"


@pytest.fixture
def client(client: Client, user: User) -> Client:
    client.force_login(user)
    return client


def memory_enabled(user: User) -> bool:
    return User.objects.get(pk=user.pk).memory_enabled


def test_the_account_page_shows_the_switch_on_and_what_off_means(client: Client) -> None:
    html = client.get("/account/").content.decode()

    assert 'id="memory-setting"' in html
    assert 'id="memory-on" name="memory" value="on" checked' in html
    assert "sends no follow-up emails (no nudges, check-ins or recaps)" in html


def test_turning_memory_off_without_javascript_saves_it_and_says_so(client: Client, user: User) -> None:
    response = client.post(URL, {"memory": "off"}, follow=True)

    assert response.redirect_chain == [("/account/#memory-setting", 302)]
    html = response.content.decode()
    assert "Memory is off." in html
    assert 'id="memory-off" name="memory" value="off" checked' in html
    assert memory_enabled(user) is False


def test_over_htmx_the_section_comes_back_alone_with_the_new_state(client: Client, user: User) -> None:
    response = client.post(URL, {"memory": "off"}, headers=HTMX)

    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html
    assert html.lstrip().startswith("<section")
    # The state said once, as what was saved.
    assert '<p class="form-success" id="memory-state" role="status">Memory is off.</p>' in html
    assert html.count("Memory is") == 1
    assert memory_enabled(user) is False

    back_on = client.post(URL, {"memory": "on"}, headers=HTMX).content.decode()

    assert "Memory is on: your coach uses your memories again." in back_on
    assert memory_enabled(user) is True


@pytest.mark.parametrize("posted", [{}, {"memory": "maybe"}, {"memory": ""}])
def test_an_answer_that_is_neither_on_nor_off_changes_nothing_and_says_so(
    client: Client, user: User, posted: dict
) -> None:
    response = client.post(URL, posted, headers=HTMX)

    assert response.status_code == 422
    assert "Choose on or off: nothing was changed." in response.content.decode()
    assert memory_enabled(user) is True
    followed = client.post(URL, posted, follow=True)
    assert "Choose on or off: nothing was changed." in followed.content.decode()


def test_turning_memory_off_keeps_every_memory(client: Client, user: User) -> None:
    memory = make_memory(user, "breakfast", summary="Oats every morning")

    client.post(URL, {"memory": "off"})

    assert list(user.memories.values_list("pk", "summary")) == [(memory.pk, "Oats every morning")]


def test_the_memory_page_says_memory_is_off_and_still_lists_the_memories(client: Client, user: User) -> None:
    make_memory(user, "breakfast", summary="Oats every morning")
    assert 'id="memory-off-notice"' not in client.get("/memories/").content.decode()

    client.post(URL, {"memory": "off"})
    html = client.get("/memories/").content.decode()

    assert 'id="memory-off-notice"' in html and "Memory is off." in html
    assert "Oats every morning" in html


def test_the_switch_is_only_for_someone_signed_in_and_only_posted(client: Client) -> None:
    assert client.get(URL).status_code == 405
    client.logout()
    response = client.post(URL, {"memory": "off"})
    assert response.status_code == 302 and response.url.startswith("/accounts/login/")
