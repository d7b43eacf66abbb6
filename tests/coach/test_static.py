"""The app serves its own static files over ASGI, in development and in production."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request

from tests.coach.wiring.test_settings import PRODUCTION
from tests.processes import REPO, uvicorn_app


def fetch(url: str) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.headers["Content-Type"], response.read()


def test_development_serves_static_files_from_the_source_folders() -> None:
    with uvicorn_app({}) as base:
        status, content_type, body = fetch(base + "/static/css/app.css")

    assert status == 200 and content_type.startswith("text/css")
    assert body == (REPO / "static" / "css" / "app.css").read_bytes()


def test_production_serves_collected_files_under_hashed_names(tmp_path) -> None:
    env = {**os.environ, **PRODUCTION, "SECURE_SSL_REDIRECT": "false", "STATIC_ROOT": str(tmp_path / "static")}
    collected = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert collected.returncode == 0, collected.stderr
    hashed = next((tmp_path / "static" / "css").glob("app.*.css")).name

    with uvicorn_app({**PRODUCTION, "SECURE_SSL_REDIRECT": "false", "STATIC_ROOT": str(tmp_path / "static")}) as base:
        status, content_type, body = fetch(f"{base}/static/css/{hashed}")

    assert status == 200 and content_type.startswith("text/css")
    assert body == (REPO / "static" / "css" / "app.css").read_bytes()
