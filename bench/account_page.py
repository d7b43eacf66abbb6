"""The account page on a web process just started, against the same page once warm.

A web process is started as production runs it and waited for until /healthz answers (as
a load balancer waits before sending it anyone); then one signed-in person opens
/account/ once (the first request of the process to render it), and WARM_REQUESTS more
times. The same is done for the memory page, which offers no time zones, so what a fresh
process costs any page stands beside what it costs the account page. Each process is
fresh: PROCESSES of them, one after the other, and the figures are medians over them.

    bin/bench account_page
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.setup import django_for_benchmarks
from bench.web_app import free_port, production_env, uvicorn_started

PROCESSES = 10
WARM_REQUESTS = 15
PAGES = ("/account/", "/memories/")


def main() -> None:
    django_for_benchmarks()
    from django.test import Client

    from accounts.models import User

    user = User.objects.create_user("account-page@example.com", "bench-password")
    User.objects.filter(pk=user.pk).update(onboarded_at=user.date_joined, time_zone="Europe/Oslo")
    client = Client()
    client.force_login(user)
    cookie = client.cookies["sessionid"].value

    # As production serves them: static files collected (with their manifest) beforehand.
    static_root = tempfile.mkdtemp(prefix="bench-static-")
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "--verbosity", "0"],
        env=production_env(port=0, STATIC_ROOT=static_root),
        check=True,
    )

    figures: dict[str, list[tuple[float, float]]] = {page: [] for page in PAGES}
    for _ in range(PROCESSES):
        for page in PAGES:
            port = free_port()
            process = uvicorn_started(production_env(port=port, STATIC_ROOT=static_root), port)
            try:
                first = _timed(port, page, cookie)
                warm = statistics.median(_timed(port, page, cookie) for _ in range(WARM_REQUESTS))
            finally:
                process.terminate()
                process.wait(timeout=30)
            figures[page].append((first, warm))

    print(f"{PROCESSES} fresh web processes for each page; warm = median of the {WARM_REQUESTS} requests after")
    print(f"{'page':<12} {'first (ms)':>11} {'warm (ms)':>10} {'first / warm':>13}")
    for page, runs in figures.items():
        first = statistics.median(f for f, _ in runs)
        warm = statistics.median(w for _, w in runs)
        ratios = ", ".join(f"{f / w:.2f}" for f, w in runs)
        print(f"{page:<12} {first * 1000:>11.1f} {warm * 1000:>10.1f} {first / warm:>12.2f}x  (each: {ratios})")


def _timed(port: int, path: str, cookie: str) -> float:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Cookie": f"sessionid={cookie}"})
    began = time.perf_counter()
    with urllib.request.urlopen(request, timeout=120) as response:
        response.read()
        assert response.status == 200, f"{path} answered {response.status}"
    return time.perf_counter() - began


if __name__ == "__main__":
    main()
