"""Statements sent together come back as if sent one by one: each its own rows, in order,
each read with a snapshot taken when it starts (so after a lock sent before it), and a
failure stops the rest; all in one round trip."""

from __future__ import annotations

import threading

import pytest
from django.db import DataError, connection, transaction
from django.test.utils import CaptureQueriesContext

from accounts.models import User
from infra.sql_together import rows_of_each
from tests.coach.races import race

pytestmark = pytest.mark.django_db

LOCK = "SELECT id FROM accounts_user WHERE id = %(user_id)s FOR UPDATE"
NAME = "SELECT name FROM accounts_user WHERE id = %(user_id)s"


def test_each_statement_gives_its_own_rows_in_order_in_one_round_trip(user: User, other_user: User) -> None:
    with CaptureQueriesContext(connection) as queries:
        rows = rows_of_each(
            [
                ("SELECT id FROM accounts_user WHERE id IN (%(user_id)s, %(other)s) ORDER BY id", {"user_id": user.pk}),
                ("SELECT %(other)s::bigint, 'two'", {"other": other_user.pk}),
                ("SELECT 1 WHERE false", {}),
                ("UPDATE accounts_user SET name = 'Ada' WHERE id = %(user_id)s", {"user_id": user.pk}),
                (NAME, {"user_id": user.pk}),
            ]
        )

    assert len(queries) == 1
    assert rows == [sorted([(user.pk,), (other_user.pk,)]), [(other_user.pk, "two")], [], [], [("Ada",)]]


def test_a_statement_that_fails_stops_the_ones_after_it() -> None:
    # A sequence's nextval is not undone by a rollback: it shows whether a statement ran.
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMPORARY SEQUENCE after_the_failure")

    with pytest.raises(DataError), transaction.atomic():
        rows_of_each([("SELECT 1 / %(zero)s", {"zero": 0}), ("SELECT nextval('after_the_failure')", {})])

    with connection.cursor() as cursor:
        cursor.execute("SELECT is_called FROM after_the_failure")
        assert cursor.fetchone() == (False,)


def test_two_statements_may_share_a_parameter_only_for_the_same_value(user: User, other_user: User) -> None:
    User.objects.filter(pk=user.pk).update(name="Ada")
    assert rows_of_each([(NAME, {"user_id": user.pk}), (NAME, {"user_id": user.pk})]) == [[("Ada",)], [("Ada",)]]
    with pytest.raises(ValueError, match="user_id"):
        rows_of_each([(NAME, {"user_id": user.pk}), (NAME, {"user_id": other_user.pk})])


@pytest.mark.django_db(transaction=True)
def test_a_read_sent_after_a_lock_sees_what_the_lock_waited_for(user: User) -> None:
    holding, release = threading.Event(), threading.Event()
    seen: list[list] = []

    def first() -> None:
        with transaction.atomic():
            rows_of_each([(LOCK, {"user_id": user.pk})])
            User.objects.filter(pk=user.pk).update(name="Written while locked")
            holding.set()
            release.wait(10)

    def second() -> None:
        with transaction.atomic():
            seen.extend(rows_of_each([(LOCK, {"user_id": user.pk}), (NAME, {"user_id": user.pk})]))

    # race() fails unless PostgreSQL shows the second waiting on the first's lock.
    race(first, second, holding=holding, release=release)

    assert seen == [[(user.pk,)], [("Written while locked",)]]


@pytest.mark.django_db(transaction=True)
def test_with_server_side_binding_the_statements_are_sent_one_by_one(user: User) -> None:
    User.objects.filter(pk=user.pk).update(name="Ada")
    options = connection.settings_dict.setdefault("OPTIONS", {})
    # The pool keeps the cursor class its connections were made with: a new pool, then.
    connection.close()
    connection.close_pool()
    options["server_side_binding"] = True
    try:
        with CaptureQueriesContext(connection) as queries:
            rows = rows_of_each([(NAME, {"user_id": user.pk}), ("SELECT %(two)s::int", {"two": 2})])
    finally:
        del options["server_side_binding"]
        connection.close()
        connection.close_pool()

    assert rows == [[("Ada",)], [(2,)]]
    assert len(queries) == 2
