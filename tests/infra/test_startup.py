"""A web process fills its URL resolvers before its first request, so no request carries
their bookkeeping from one thread to the next (see infra/startup.py)."""

from __future__ import annotations

import contextvars

import pytest
from asgiref.local import _Storage
from django.test import Client
from django.urls import clear_url_caches

from infra.startup import url_resolvers_filled

# A page that names other pages by their URLs' names, as most do: reversing fills resolvers.
PAGE = "/accounts/login/"


def _asgiref_values_in_this_context() -> int:
    return sum(isinstance(value, _Storage) for value in contextvars.copy_context().values())


def _values_a_first_request_leaves(client: Client) -> int:
    def first_request() -> int:
        before = _asgiref_values_in_this_context()
        assert client.get(PAGE).status_code == 200
        return _asgiref_values_in_this_context() - before

    # In a context of its own, as a server's request is: what it sets stays there.
    return contextvars.copy_context().run(first_request)


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

    url_resolvers_filled()

    # What a request sets for itself may stay; the resolvers' 22 values do not.
    assert unfilled > 20
    assert _values_a_first_request_leaves(client) <= 1
    # And the resolvers answer as before.
    assert client.get(PAGE).status_code == 200
