"""The web app as the benchmarks start it: production settings, a port of its own, and
nothing measured until it answers (as a load balancer waits before sending it anyone)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    """A port nothing listens on now, so another benchmark or app on this machine is left alone."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def production_env(*, port: int, **more: str) -> dict[str, str]:
    """This process's environment with the settings production runs under (no debug query
    log, no debug templates), served plainly on `port` where production sits behind TLS,
    and `more` settings on top."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "coach.wiring.settings",
        "DJANGO_DEBUG": "false",
        "SECURE_SSL_REDIRECT": "false",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "SITE_URL": f"http://127.0.0.1:{port}",
        # Required in production; nothing is mailed here.
        "EMAIL_HOST": "smtp.example.com",
        "EMAIL_USE_TLS": "true",
        "LOG_LEVEL": "WARNING",
        **more,
    }


def uvicorn_started(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    """One uvicorn process of the app on `port`, once it answers."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "coach.wiring.asgi:application",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env=env,
    )
    try:
        wait_until_up(f"http://127.0.0.1:{port}/healthz")
    except BaseException:
        process.kill()
        raise
    return process


def wait_until_up(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"the web app did not answer {url} within a minute")


def cpu_seconds(pid: int) -> float:
    """User and system CPU time a process has used, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
