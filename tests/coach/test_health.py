from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pytest
from django.test import Client

from coach.wiring.localservices import start_postgres
from tests.coach.test_degrading import frozen
from tests.processes import app_process, get_json, uvicorn_app

# More than the threads /healthz ever had: each probe once left one stuck on the database.
PROBES_IN_A_ROW = 8


@pytest.mark.django_db
def test_healthz_is_200_when_database_and_redis_answer(client: Client) -> None:
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_healthz_is_503_naming_redis_when_it_does_not_answer(client: Client, settings) -> None:
    settings.REDIS_URL = "redis://127.0.0.1:1/0"

    response = client.get("/healthz")

    assert response.status_code == 503
    assert list(response.json()["failing"]) == ["redis"]


def test_healthz_is_503_naming_the_database_once_it_is_stopped(tmp_path: Path) -> None:
    database = start_postgres(tmp_path / "postgres", throwaway=True)
    try:
        with uvicorn_app({"DATABASE_URL": database.url}) as base:
            assert get_json(base + "/healthz") == (200, {"status": "ok"})

            database.stop()

            status, body = get_json(base + "/healthz")
            assert status == 503
            assert list(body["failing"]) == ["database"]
    finally:
        database.stop()


def test_healthz_refuses_post(client: Client) -> None:
    assert client.post("/healthz").status_code == 405


def test_healthz_names_only_the_database_on_every_probe_while_postgres_is_frozen(tmp_path: Path) -> None:
    database = start_postgres(tmp_path / "postgres", throwaway=True)
    try:
        with app_process({"DATABASE_URL": database.url}) as app:
            assert get_json(app.url + "/healthz") == (200, {"status": "ok"})

            with frozen(tmp_path / "postgres"):
                # A load balancer asking every second or so. The deadline is 1.5 s; the
                # client allows twice that (a shared CI machine), an answer at all in time.
                probes = [get_json(app.url + "/healthz", timeout=3) for _ in range(PROBES_IN_A_ROW)]
                alive = get_json(app.url + "/livez", timeout=3)

            named = [(status, list(body["failing"])) for status, body in probes]
            assert named == [(503, ["database"])] * PROBES_IN_A_ROW
            assert probes[0][1]["failing"]["database"] == "no answer within 1.5 s"
            assert all(body["failing"]["database"].startswith("still no answer, ") for _, body in probes[1:])
            assert alive == (200, {"status": "alive"})
            assert get_json(app.url + "/healthz", timeout=10) == (200, {"status": "ok"})
    finally:
        database.stop()


def test_healthz_names_the_database_read_only_while_it_refuses_writes(tmp_path: Path) -> None:
    database = start_postgres(tmp_path / "postgres", throwaway=True)
    admin_url = database.url.rsplit("/", 1)[0] + "/postgres"
    try:
        with app_process({"DATABASE_URL": database.url}) as app:
            assert get_json(app.url + "/healthz") == (200, {"status": "ok"})

            # As an operator makes it refuse writes; the sessions already open follow too.
            set_read_only(admin_url, True)
            read_only = get_json(app.url + "/healthz")
            set_read_only(admin_url, False)

            assert read_only == (
                503,
                {
                    "status": "unavailable",
                    "failing": {"database": "read-only: it refuses writes (default_transaction_read_only is on)"},
                },
            )
            assert get_json(app.url + "/healthz") == (200, {"status": "ok"})
    finally:
        database.stop()


def set_read_only(admin_url: str, read_only: bool) -> None:
    """Every session of the server read-only by default (or no longer), as after
    `ALTER SYSTEM` and a reload: once a new session has it, the server has told the open
    ones too, and each follows from its next statement on."""
    with psycopg.connect(admin_url, autocommit=True) as admin:
        if read_only:
            admin.execute("ALTER SYSTEM SET default_transaction_read_only = on")
        else:
            admin.execute("ALTER SYSTEM RESET default_transaction_read_only")
        admin.execute("SELECT pg_reload_conf()")
    expected = "on" if read_only else "off"
    deadline = time.monotonic() + 10
    while True:
        with psycopg.connect(admin_url) as probe:
            [(now,)] = probe.execute("SHOW default_transaction_read_only").fetchall()
        if now == expected:
            return
        assert time.monotonic() < deadline, "the server did not take the new setting"
        time.sleep(0.05)
