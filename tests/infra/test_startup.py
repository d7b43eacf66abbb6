"""A web process fills its URL resolvers before its first request, so no request carries
their bookkeeping from one thread to the next (see infra/startup.py)."""

from __future__ import annotations

import contextvars

import pytest
from asgiref.local import _Storage
from django.template.base import Template
from django.test import Client
from django.urls import clear_url_caches

from accounts.models import User
from infra.startup import templates_compiled, url_resolvers_filled

# A page that names other pages by their URLs' names, as most do: reversing fills resolvers.
PAGE = "/accounts/login/"


def _values_a_first_request_leaves(client: Client) -> int:
    """How many asgiref values a request leaves in its context, from an empty one (a
    server's first request inherits nothing from a test that ran before)."""

    def first_request() -> int:
        assert client.get(PAGE).status_code == 200
        return _values_here()

    return contextvars.Context().run(first_request)


def _values_here() -> int:
    return sum(isinstance(value, _Storage) for value in contextvars.copy_context().values())


@pytest.fixture
def resolvers_unfilled():
    clear_url_caches()
    yield
    clear_url_caches()


def test_a_first_request_fills_the_resolvers_in_its_own_context_unless_they_were_filled_at_startup(
    resolvers_unfilled: None, db: None
) -> None:
    client = Client()
    unfilled = _values_a_first_request_leaves(client)
    clear_url_caches()

    # At startup, from an empty context too: the process's own context is the one every
    # request's is copied from.
    left_at_startup = contextvars.Context().run(lambda: (url_resolvers_filled(), _values_here())[1])

    assert left_at_startup == 0
    # Only the request's own value stays (the URLconf it was served by), not the resolvers'.
    assert unfilled > 1
    assert _values_a_first_request_leaves(client) == 1
    # And the resolvers answer as before.
    assert client.get(PAGE).status_code == 200


def test_once_every_template_is_compiled_at_startup_the_account_page_compiles_none(
    client: Client, user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Forms' widgets have an engine of their own: its templates count too.
    templates_compiled()
    compiled: list[str | None] = []
    real = Template.__init__

    def counted(
        self: Template, template_string: object, origin: object = None, name: object = None, engine: object = None
    ) -> None:
        compiled.append(getattr(origin, "name", None))
        real(self, template_string, origin, name, engine)

    monkeypatch.setattr(Template, "__init__", counted)
    client.force_login(user)

    assert client.get("/account/").status_code == 200
    assert client.get("/memories/").status_code == 200
    assert compiled == []
