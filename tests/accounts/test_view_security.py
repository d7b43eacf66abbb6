"""Every view of the memory and account pages: the owner gets 200, another person's id a
404, an anonymous visitor the login page, a wrong method 405, an htmx request the partial,
and a state change without the CSRF token a 403."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from django.test import Client

from accounts.models import User
from memory.drafts import MemoryDraft
from memory.models import MemoryEvent, MemoryProposal
from memory.proposals import proposal_make
from tests.conftest import PASSWORD
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


@dataclass(frozen=True)
class Ids:
    memory: int
    proposal: int
    forgotten: int


@dataclass(frozen=True)
class Endpoint:
    name: str
    method: str
    path: Callable[[Ids], str]
    data: dict[str, Any] = field(default_factory=dict)
    # Text only the partial contains; None when the view has no partial.
    partial_marker: str | None = None
    # An htmx request gets an empty 200 (a removed row).
    empty_partial: bool = False
    # Names one of the person's memories, proposals or forgotten memories.
    by_id: bool = False
    reauthenticate: bool = False
    # A view that answers both GET and POST refuses PUT.
    wrong_method: str = ""

    def __str__(self) -> str:
        return self.name

    @property
    def refused_method(self) -> str:
        return self.wrong_method or ("get" if self.method == "post" else "post")


EDIT = {"summary": "Eggs now", "content": "", "tier": "episodic", "category": "habit", "version": ""}
PREFERENCES = {"frequency": "weekly", "quiet_start": "21:00", "quiet_end": "08:00", "time_zone": "Europe/Helsinki"}

ENDPOINTS = [
    Endpoint("memories", "get", lambda ids: "/memories/", partial_marker='id="memory-groups"'),
    Endpoint(
        "add",
        "post",
        lambda ids: "/memories/add",
        {"summary": "Vegetarian", "tier": "profile", "category": "preference"},
        partial_marker='id="add-form"',
    ),
    Endpoint("context", "get", lambda ids: "/memories/context", partial_marker='class="context-report"'),
    Endpoint("detail", "get", lambda ids: f"/memories/{ids.memory}/", partial_marker='class="memory', by_id=True),
    Endpoint(
        "history", "get", lambda ids: f"/memories/{ids.memory}/history", partial_marker='class="history"', by_id=True
    ),
    Endpoint(
        "edit form",
        "get",
        lambda ids: f"/memories/{ids.memory}/edit",
        partial_marker="memory editing",
        by_id=True,
        wrong_method="put",
    ),
    Endpoint(
        "edit",
        "post",
        lambda ids: f"/memories/{ids.memory}/edit",
        EDIT,
        partial_marker="Eggs now",
        by_id=True,
        wrong_method="put",
    ),
    Endpoint(
        "delete form",
        "get",
        lambda ids: f"/memories/{ids.memory}/delete",
        partial_marker="Delete this memory?",
        by_id=True,
        wrong_method="put",
    ),
    Endpoint(
        "delete",
        "post",
        lambda ids: f"/memories/{ids.memory}/delete",
        partial_marker=">Undo</button>",
        by_id=True,
        wrong_method="put",
    ),
    Endpoint(
        "keep", "post", lambda ids: f"/memories/{ids.memory}/keep", partial_marker='id="next-to-forget"', by_id=True
    ),
    Endpoint(
        "restore",
        "post",
        lambda ids: f"/memories/forgotten/{ids.forgotten}/restore",
        partial_marker="hx-swap-oob",
        by_id=True,
    ),
    Endpoint(
        "confirm",
        "post",
        lambda ids: f"/memories/proposals/{ids.proposal}/confirm",
        partial_marker="hx-swap-oob",
        by_id=True,
    ),
    Endpoint(
        "reject", "post", lambda ids: f"/memories/proposals/{ids.proposal}/reject", empty_partial=True, by_id=True
    ),
    Endpoint("account", "get", lambda ids: "/account/"),
    Endpoint(
        "email preferences",
        "post",
        lambda ids: "/account/email-preferences",
        PREFERENCES,
        partial_marker='id="preferences-form"',
    ),
    Endpoint("resume emails", "post", lambda ids: "/account/emails/resume", partial_marker='id="preferences-form"'),
    Endpoint("start the export", "get", lambda ids: "/account/export/start", reauthenticate=True),
    Endpoint("export", "get", lambda ids: "/account/export", reauthenticate=True),
    Endpoint(
        "delete all memories form",
        "get",
        lambda ids: "/account/delete-memories",
        reauthenticate=True,
        wrong_method="put",
    ),
    Endpoint(
        "delete all memories", "post", lambda ids: "/account/delete-memories", reauthenticate=True, wrong_method="put"
    ),
    Endpoint("delete account form", "get", lambda ids: "/account/delete", reauthenticate=True, wrong_method="put"),
    Endpoint("delete account", "post", lambda ids: "/account/delete", reauthenticate=True, wrong_method="put"),
]
BY_ID = [e for e in ENDPOINTS if e.by_id]
POSTS = [e for e in ENDPOINTS if e.method == "post"]
PARTIALS = [e for e in ENDPOINTS if e.partial_marker or e.empty_partial]


def owned_by(user: User, suffix: str) -> Ids:
    """A memory (protected, with a pending proposal) and a forgotten one, for `user`."""
    memory = make_memory(user, f"breakfast-{suffix}", source="user", summary="Oats every morning")
    proposal = proposal_make(
        user=user,
        memory=memory,
        kind=MemoryProposal.Kind.UPDATE,
        draft=replace(MemoryDraft.of(memory), summary="Eggs"),
        reason="You said you switched",
    )
    gone = make_memory(user, f"rain-{suffix}", summary="Runs in the rain")
    event = MemoryEvent.objects.create(
        user=user,
        memory_id=gone.pk,
        key=gone.key,
        actor="system",
        action="evicted",
        reason="room",
        before=gone.snapshot(),
    )
    gone.delete()
    return Ids(memory=memory.pk, proposal=proposal.pk, forgotten=event.pk)


@pytest.fixture
def mine(user: User) -> Ids:
    return owned_by(user, "mine")


@pytest.fixture
def theirs(other_user: User) -> Ids:
    return owned_by(other_user, "theirs")


def logged_in(user: User, *, reauthenticated: bool = False, **client_options: Any) -> Client:
    client = Client(**client_options)
    client.force_login(user)
    if reauthenticated:
        # Through a client of the same session that sends the token: the CSRF tests need
        # a session that has re-entered its password and a client that sends no token.
        helper = Client()
        helper.cookies = client.cookies
        assert helper.post("/accounts/reauthenticate/", {"password": PASSWORD}).status_code == 302
    return client


def send(client: Client, endpoint: Endpoint, ids: Ids, **extra: Any):
    return getattr(client, endpoint.method)(endpoint.path(ids), endpoint.data, **extra)


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=str)
def test_anonymous_visitors_are_sent_to_log_in(endpoint: Endpoint, mine: Ids) -> None:
    response = send(Client(), endpoint, mine)

    assert response.status_code == 302
    assert response.url.startswith("/accounts/login/")


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=str)
def test_the_owner_gets_a_200(endpoint: Endpoint, user: User, mine: Ids) -> None:
    client = logged_in(user, reauthenticated=endpoint.reauthenticate)

    response = send(client, endpoint, mine, headers={} if endpoint.reauthenticate else HTMX)

    if endpoint.method == "post" and endpoint.reauthenticate:
        # Done, then back to a page: the memory page, or the login page for a deleted account.
        assert response.status_code == 302 and not response.url.startswith("/accounts/reauthenticate")
    else:
        assert response.status_code == 200


@pytest.mark.parametrize("endpoint", BY_ID, ids=str)
def test_another_persons_id_is_a_404(endpoint: Endpoint, user: User, mine: Ids, theirs: Ids) -> None:
    response = send(logged_in(user), endpoint, theirs, headers=HTMX)

    assert response.status_code == 404


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=str)
def test_a_wrong_method_is_a_405(endpoint: Endpoint, user: User, mine: Ids) -> None:
    client = logged_in(user, reauthenticated=True)

    response = getattr(client, endpoint.refused_method)(endpoint.path(mine))

    assert response.status_code == 405


@pytest.mark.parametrize("endpoint", PARTIALS, ids=str)
def test_an_htmx_request_gets_the_partial(endpoint: Endpoint, user: User, mine: Ids) -> None:
    response = send(logged_in(user), endpoint, mine, headers=HTMX)

    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" not in html and "<nav" not in html
    if endpoint.empty_partial:
        assert html == ""
    else:
        assert endpoint.partial_marker in html


@pytest.mark.parametrize("endpoint", POSTS, ids=str)
def test_a_state_change_without_the_csrf_token_is_refused(endpoint: Endpoint, user: User, mine: Ids) -> None:
    client = logged_in(user, reauthenticated=endpoint.reauthenticate, enforce_csrf_checks=True)

    response = send(client, endpoint, mine, headers=HTMX)

    assert response.status_code == 403
    assert User.objects.filter(pk=user.pk).exists()
