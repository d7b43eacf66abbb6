from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client

from coach.localservices import start_postgres
from tests.processes import get_json, uvicorn_app


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
