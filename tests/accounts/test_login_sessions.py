"""Who is signed in: the login session and its person are read in one query, and every
check Django and allauth make on a session still holds on the person read with it."""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.apps import apps
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, aget_user, get_user
from django.contrib.sessions.middleware import SessionMiddleware
from django.http import HttpRequest, HttpResponse
from django.test import AsyncClient, Client, RequestFactory
from django.utils import timezone
from psycopg import sql

from accounts.backends import ModelBackend
from accounts.models import LoginSession, User
from accounts.sessions import SessionStore
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db

renaming = importlib.import_module("accounts.migrations.0005_login_sessions_name_the_app_backends")


def request_with(client: Client) -> HttpRequest:
    request = RequestFactory().get("/")
    request.COOKIES["sessionid"] = client.cookies["sessionid"].value
    SessionMiddleware(lambda _: HttpResponse()).process_request(request)
    return request


def signed_in_before_the_rename(user: User) -> str:
    """A session as the login of the previous release stored it."""
    store = SessionStore()
    store[SESSION_KEY] = str(user.pk)
    store[BACKEND_SESSION_KEY] = "allauth.account.auth_backends.AuthenticationBackend"
    store[HASH_SESSION_KEY] = user.get_session_auth_hash()
    store.create()
    return store.session_key


def test_who_is_signed_in_costs_one_query(client: Client, user: User, django_assert_num_queries) -> None:
    client.force_login(user)
    request = request_with(client)

    with django_assert_num_queries(1):
        signed_in = get_user(request)

    assert signed_in == user


def test_who_is_signed_in_costs_one_query_from_async_code_too(
    client: Client, user: User, django_assert_num_queries
) -> None:
    client.force_login(user)
    request = request_with(client)

    with django_assert_num_queries(1):
        signed_in = async_to_sync(aget_user)(request)

    assert signed_in == user


def loaded_with_more(request: HttpRequest) -> User:
    """Who is signed in, the login loaded by a statement that read more besides."""
    request.session.load_with(columns=sql.SQL(", 1"), joins=sql.SQL(""), parameters={})
    return get_user(request)


WHO_ASKS = [get_user, async_to_sync(aget_user), loaded_with_more]
WAYS = ["sync", "async", "loaded-with-more"]


def test_a_login_loaded_with_more_costs_that_one_query_and_signs_the_same_person_in(
    client: Client, user: User, other_user: User, django_assert_num_queries
) -> None:
    client.force_login(user)
    request = request_with(client)

    with django_assert_num_queries(1):
        more = request.session.load_with(
            columns=sql.SQL(", o.email"),
            joins=sql.SQL("LEFT JOIN accounts_user o ON o.id = %(other)s"),
            parameters={"other": other_user.pk},
        )
        signed_in = get_user(request)

    assert signed_in == user and list(more) == [other_user.email]
    # Loaded already: nothing more is read.
    assert request.session.load_with(columns=sql.SQL(", 1"), joins=sql.SQL(""), parameters={}) is None


def test_no_login_loaded_with_more_reads_nothing_more(client: Client, user: User) -> None:
    client.force_login(user)
    LoginSession.objects.filter(user=user).update(expire_date=timezone.now() - timedelta(seconds=1))
    request = request_with(client)

    assert request.session.load_with(columns=sql.SQL(", 1"), joins=sql.SQL(""), parameters={}) is None
    assert not get_user(request).is_authenticated


@pytest.mark.parametrize("who_asks", WHO_ASKS, ids=WAYS)
def test_a_person_made_inactive_is_signed_out_though_their_session_stands(client: Client, user: User, who_asks) -> None:
    client.force_login(user)
    User.objects.filter(pk=user.pk).update(is_active=False)

    assert not who_asks(request_with(client)).is_authenticated


@pytest.mark.parametrize("who_asks", WHO_ASKS, ids=WAYS)
def test_an_expired_session_signs_nobody_in(client: Client, user: User, who_asks) -> None:
    client.force_login(user)
    LoginSession.objects.filter(user=user).update(expire_date=timezone.now() - timedelta(seconds=1))

    assert not who_asks(request_with(client)).is_authenticated


def test_a_session_without_its_owner_recorded_still_signs_its_person_in(
    client: Client, user: User, django_assert_num_queries
) -> None:
    """A session whose owner column is empty (saved before owners were recorded) is read
    without one: the backend reads the person itself, and only that person."""
    client.force_login(user)
    LoginSession.objects.filter(user=user).update(user=None)
    request = request_with(client)

    with django_assert_num_queries(2):  # the session, then the person
        signed_in = get_user(request)

    assert signed_in == user


@pytest.mark.parametrize("who_asks", WHO_ASKS, ids=WAYS)
def test_a_changed_password_signs_the_persons_other_sessions_out(user: User, who_asks) -> None:
    elsewhere = Client()
    elsewhere.post("/accounts/login/", {"login": user.email, "password": PASSWORD})
    assert elsewhere.get("/account/").status_code == 200

    user.set_password("a whole new passphrase 42")
    user.save()

    assert not who_asks(request_with(elsewhere)).is_authenticated
    assert elsewhere.get("/account/").status_code == 302


def test_the_session_owner_is_handed_only_for_the_person_it_belongs_to(
    client: Client, user: User, other_user: User, django_assert_num_queries
) -> None:
    client.force_login(user)
    request = request_with(client)
    request.session.load()

    # Whatever asks next for someone else gets that someone, read from the database; and
    # the session's owner is not kept for a later ask either.
    assert ModelBackend().get_user(other_user.pk) == other_user
    with django_assert_num_queries(1):
        assert ModelBackend().get_user(user.pk) == user


def test_a_session_signed_in_before_the_backends_were_renamed_stays_signed_in(user: User) -> None:
    client = Client()
    client.cookies["sessionid"] = signed_in_before_the_rename(user)
    assert client.get("/account/").status_code == 302, "the old name is no longer listed"

    renaming.forwards(apps, None)

    assert client.get("/account/").status_code == 200
    renaming.backwards(apps, None)
    assert SessionStore(client.cookies["sessionid"].value).load()[BACKEND_SESSION_KEY] == (
        "allauth.account.auth_backends.AuthenticationBackend"
    )


def test_a_session_saved_by_an_async_login_belongs_to_its_person(user: User) -> None:
    client = AsyncClient()
    async_to_sync(client.aforce_login)(user)

    assert LoginSession.objects.get(session_key=client.cookies["sessionid"].value).user_id == user.pk


def test_a_session_an_async_login_left_without_an_owner_is_given_one_or_deleted(user: User, other_user: User) -> None:
    kept, orphaned = signed_in_before_the_rename(user), signed_in_before_the_rename(other_user)
    LoginSession.objects.filter(session_key__in=[kept, orphaned]).update(user=None)
    other_user.delete()

    renaming.forwards(apps, None)

    assert LoginSession.objects.get(session_key=kept).user_id == user.pk
    assert not LoginSession.objects.filter(session_key=orphaned).exists()


@pytest.mark.parametrize("load", [SessionStore.load, async_to_sync(SessionStore.aload)], ids=["sync", "async"])
def test_a_session_gone_is_forgotten_so_that_a_save_makes_a_new_one(load) -> None:
    store = SessionStore("gone" * 8)

    assert load(store) == {}
    assert store.session_key is None
