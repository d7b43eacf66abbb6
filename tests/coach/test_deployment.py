"""docker-compose.yml runs the same processes as the run command (no engine here: parsed)."""

from __future__ import annotations

import yaml

from tests.processes import REPO


def compose() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


def test_compose_names_web_worker_beat_postgres_redis_and_a_mail_catcher() -> None:
    services = compose()["services"]

    assert {"web", "worker", "beat", "postgres", "redis", "mailpit"} <= set(services)


def test_web_worker_and_beat_share_one_image_and_run_their_own_commands() -> None:
    services = compose()["services"]

    assert {services[name]["build"] for name in ("web", "worker", "beat", "migrate")} == {"."}
    assert services["web"]["command"][:2] == ["uvicorn", "coach.asgi:application"]
    assert services["worker"]["command"][:4] == ["celery", "-A", "coach", "worker"]
    assert services["beat"]["command"][:4] == ["celery", "-A", "coach", "beat"]
    assert services["migrate"]["command"] == ["python", "manage.py", "migrate", "--noinput"]


def test_postgres_is_the_pgvector_image_and_data_lives_in_volumes() -> None:
    data = compose()
    services = data["services"]

    assert services["postgres"]["image"].startswith("pgvector/pgvector:")
    assert services["redis"]["image"].startswith("redis:")
    assert set(data["volumes"]) >= {"postgres-data", "redis-data"}
    assert any(volume.startswith("postgres-data:") for volume in services["postgres"]["volumes"])


def test_every_long_running_service_has_a_healthcheck() -> None:
    services = compose()["services"]

    for name in ("web", "worker", "offline-coach", "postgres", "redis", "mailpit"):
        assert services[name]["healthcheck"]["test"], name
    assert "/healthz" in " ".join(services["web"]["healthcheck"]["test"])


def test_the_app_waits_for_healthy_services_and_finished_migrations() -> None:
    services = compose()["services"]

    for name in ("web", "worker", "beat"):
        depends = services[name]["depends_on"]
        assert depends["postgres"]["condition"] == "service_healthy"
        assert depends["redis"]["condition"] == "service_healthy"
        assert depends["migrate"]["condition"] == "service_completed_successfully"


def test_secrets_have_no_default_in_compose() -> None:
    environment = compose()["services"]["web"]["environment"]

    assert environment["DJANGO_SECRET_KEY"].startswith("${DJANGO_SECRET_KEY:?")
    assert environment["FIELD_ENCRYPTION_KEYS"].startswith("${FIELD_ENCRYPTION_KEYS:?")


def test_every_variable_the_settings_read_is_documented_in_env_example() -> None:
    documented = {
        line.split("=", 1)[0]
        for line in (REPO / ".env.example").read_text().splitlines()
        if line and not line.startswith("#")
    }
    settings_source = (REPO / "coach" / "settings.py").read_text()
    import re

    read = set(re.findall(r'env_(?:str|bool|int|float|list|required)\(\s*"([A-Z_]+)"', settings_source))

    assert read, "the settings read no variables?"
    assert read - documented == set()


def test_every_variable_in_env_example_is_in_the_readme() -> None:
    readme = (REPO / "README.md").read_text()
    documented = {
        line.split("=", 1)[0]
        for line in (REPO / ".env.example").read_text().splitlines()
        if line and not line.startswith("#")
    }

    assert {name for name in documented if f"`{name}`" not in readme} == set()


def test_without_a_key_the_app_talks_to_the_offline_coach_service() -> None:
    services = compose()["services"]

    assert services["offline-coach"]["command"][:3] == ["python", "-m", "offline_coach"]
    assert services["web"]["environment"]["OFFLINE_COACH_URL"] == "http://offline-coach:8001/v1"
