"""The chat over real HTTP, against the web processes the run command starts: a turn's CPU
against its floor (PostgreSQL and Redis counted), and the first words of many chats at once.

Imported by bench/scale.py once Django is set up.
"""

from __future__ import annotations

import http.client
import os
import re
import secrets
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.db import connection
from django.test import Client
from openai import OpenAI

from accounts.models import User
from bench.chat_load import _follow_in_own_process
from bench.chat_people import REPLY, STREAM_SECONDS
from bench.web_app import cpu_seconds, free_port, production_env, wait_until_up
from coach.services import session_start
from coach.wiring.supervisor import app_processes
from infra.redis import redis_sync
from offline_coach import ModelServer

# A port of its own, so another benchmark or app on this machine is left alone.
PORT = free_port()
STREAM_PATH = re.compile(r'data-stream-url="([^"]+)"')


@dataclass(frozen=True)
class Chatter:
    """A person signed in, with a conversation open, as a browser holds them."""

    user_id: int
    session_id: int
    cookie: str
    csrf: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Cookie": f"sessionid={self.cookie}; csrftoken={self.csrf}"}


def chatters(user_ids: list[int]) -> list[Chatter]:
    """Each person signed in (a login session of their own) with a new conversation."""
    found = []
    for user_id in user_ids:
        user = User.objects.get(pk=user_id)
        client = Client()
        client.force_login(user)
        session = session_start(user=user)
        found.append(Chatter(user_id, session.pk, client.cookies["sessionid"].value, secrets.token_hex(16)))
    return found


@contextmanager
def web_processes(server: ModelServer, database: str) -> Iterator[list[int]]:
    """The web app as the run command starts it (its `web` process and whatever that runs:
    one uvicorn, or one per core), with production settings, on the named database of the
    benchmark's PostgreSQL; yields the pids of every process serving requests, once it
    answers."""
    with tempfile.TemporaryDirectory() as data_dir:
        (spec,) = [spec for spec in app_processes("127.0.0.1", PORT, Path(data_dir)) if spec.name == "web"]
        output = Path(data_dir) / "web.log"
        with output.open("wb") as written:
            process = subprocess.Popen(
                spec.argv,
                env=_production_env(server, database),
                stdout=written,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            wait_until_up(f"http://127.0.0.1:{PORT}/healthz")
            # Every worker a parent starts answers once the parent's port does; their first
            # requests warm them all.
            for _ in range(20):
                _request("GET", "/livez", {})
            yield _serving(process.pid)
        finally:
            process.terminate()
            process.wait(timeout=60)
            _say_what_went_wrong(output)


def _say_what_went_wrong(output: Path) -> None:
    """The web processes' warnings and errors, counted, and the first of each kind shown."""
    seen: dict[str, int] = {}
    for line in output.read_text(errors="replace").splitlines():
        if line.startswith(("WARNING", "ERROR", "CRITICAL", "Traceback")):
            kind = line[:100]
            seen[kind] = seen.get(kind, 0) + 1
    for kind, count in seen.items():
        print(f"  web processes logged {count}x: {kind}", flush=True)


def _production_env(server: ModelServer, database: str) -> dict[str, str]:
    return production_env(
        port=PORT,
        DATABASE_URL=urlsplit(os.environ["DATABASE_URL"])._replace(path=f"/{database}").geturl(),
        OPENAI_BASE_URL=server.base_url,
        OPENAI_API_KEY="bench",
        # A benchmark person chats far faster than any limit lets a real one.
        COACH_MAX_OPEN_STREAMS="100000",
        COACH_MESSAGES_PER_MINUTE="100000",
        SHUTDOWN_GRACE_SECONDS="1",
        PYTHONPATH=str(Path(__file__).resolve().parent.parent),
    )


def _serving(pid: int) -> list[int]:
    """The process and its children (uvicorn's workers, if it starts any)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [pid, *map(int, children)]


# CPU, counted for every process a turn runs in -------------------------------------------------


class CpuMeter:
    """CPU seconds of this process (the client and the model server's threads), the web
    processes, PostgreSQL (the postmaster and every backend, living or gone) and Redis."""

    def __init__(self, web: list[int]) -> None:
        self.web = web
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            (backend,) = cursor.fetchone()
        self.postmaster = int(Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()[1])
        self.redis = int(redis_sync().info("server")["process_id"])

    def read(self) -> dict[str, float]:
        postgres = _cpu_with_reaped(self.postmaster) + sum(
            cpu_seconds(int(child)) for child in _children(self.postmaster)
        )
        return {
            "bench": time.process_time(),
            "web": sum(cpu_seconds(pid) for pid in self.web),
            "postgres": postgres,
            "redis": cpu_seconds(self.redis),
        }

    @staticmethod
    def spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
        return {name: after[name] - before[name] for name in before}


def _children(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []


def _cpu_with_reaped(pid: int) -> float:
    """A process's CPU and that of its children it has collected."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(fields[n]) for n in (11, 12, 13, 14)) / os.sysconf("SC_CLK_TCK")


# One turn, as the browser takes it -------------------------------------------------------------


def _request(method: str, path: str, headers: dict[str, str], body: str = "") -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)
    try:
        conn.request(method, path, body=body.encode(), headers={**headers, "Connection": "close"})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def turn_over_http(chatter: Chatter, number: int) -> None:
    """Post a message as the page does (htmx), then read its reply's stream to its end."""
    form = f"text=Question+{number}%3A+how+was+my+week%3F&client_id={os.urandom(16).hex()}"
    headers = {
        **chatter.headers,
        "X-CSRFToken": chatter.csrf,
        "HX-Request": "true",
        "Content-Type": "application/x-www-form-urlencoded",
    }
    status, page = _request("POST", f"/chat/{chatter.session_id}/messages", headers, form)
    found = STREAM_PATH.search(page.decode())
    if status != 200 or found is None:
        raise SystemExit(f"posting a message answered {status}: {page[:300]!r}")
    status, events = _request("GET", found.group(1), chatter.headers)
    if b"event: done" not in events:
        raise SystemExit(f"the reply did not end done: {events[-300:]!r}")


def cpu_against_floor(server: ModelServer, chatter: Chatter, pairs: int, *, database: str) -> dict[str, Any]:
    """`pairs` turns and as many floors, alternated, each counted in every process (the
    mean of each, in ms): a turn
    (a message posted and its reply read to the end, over HTTP) against its floor (two bare
    requests to the same web processes, and the same completion the turn asked for,
    streamed from the same model through the SDK)."""
    with web_processes(server, database) as web:
        meter = CpuMeter(web)
        sdk = OpenAI(base_url=server.base_url, api_key="bench", max_retries=0)
        for warm in range(3):
            server.queue_text(REPLY)
            turn_over_http(chatter, -warm)
        turns: list[dict[str, float]] = []
        floors: list[dict[str, float]] = []
        for number in range(pairs):
            server.queue_text(REPLY)
            before = meter.read()
            turn_over_http(chatter, number)
            turns.append(meter.spent(before, meter.read()))
            body = server.chat_requests()[-1]
            server.queue_text(REPLY)
            before = meter.read()
            for _ in range(2):
                _request("GET", "/livez", chatter.headers)
            for _ in sdk.chat.completions.create(**{**body, "stream": True}):
                pass
            floors.append(meter.spent(before, meter.read()))
    turn = _means(turns)
    floor = _means(floors)
    return {"turn": turn, "floor": floor, "ratio": sum(turn.values()) / sum(floor.values())}


def _means(samples: list[dict[str, float]]) -> dict[str, float]:
    """Milliseconds per sample, each process's: means, not medians, since the kernel counts
    other processes' CPU in ticks of 10 ms, which only a sum over many samples resolves."""
    return {name: sum(s[name] for s in samples) / len(samples) * 1000 for name in samples[0]}


# Many chats at once -----------------------------------------------------------------------------


def first_words(
    server: ModelServer, people: list[Chatter], bursts: tuple[int, ...], *, database: str
) -> list[dict[str, Any]]:
    """For each burst size: that many people post a message at the same moment and follow
    its reply, which the model starts at once and streams over STREAM_SECONDS; the time
    from posting to the first words, whether every reply came in words as it was written
    (not whole at its end, as it does when a reader cannot follow the stream), and the
    CPU the web processes, PostgreSQL and Redis spent meanwhile."""
    results = []
    with web_processes(server, database) as web:
        meter = CpuMeter(web)
        cores = len(os.sched_getaffinity(0))
        for chatter in people[: max(bursts)]:
            server.queue_text(REPLY)
            turn_over_http(chatter, 0)
        for count in bursts:
            for _ in range(count):
                server.queue_text(REPLY, chunk_delay_seconds=STREAM_SECONDS / len(REPLY.split(" ")))
            plan = {
                "port": PORT,
                "gap": 0,
                "first_words": "^event: text",
                "requests": [_post_then_follow(chatter, count) for chatter in people[:count]],
            }
            before = meter.read()
            followed = _follow_in_own_process(plan)
            spent = meter.spent(before, meter.read())
            firsts = sorted(first * 1000 for first, _, _ in followed)
            streamed = [first for first, _, done in followed if done and first != float("inf")]
            results.append(
                {
                    "chats": count,
                    "p50": statistics.median(firsts),
                    "p95": firsts[max(0, int(len(firsts) * 0.95) - 1)],
                    "streamed": len(streamed),
                    "unstreamed": sum(1 for first, _, done in followed if done and first == float("inf")),
                    "failed": sum(1 for _, _, done in followed if not done),
                    "app_cpu_ms": (spent["web"] + spent["postgres"] + spent["redis"]) * 1000,
                    "cores": cores,
                }
            )
            time.sleep(STREAM_SECONDS)
    return results


def _post_then_follow(chatter: Chatter, burst: int) -> dict[str, Any]:
    body = f"text=Plan+my+week+please+({burst})&client_id={os.urandom(16).hex()}"
    return {
        "method": "POST",
        "path": f"/chat/{chatter.session_id}/messages",
        "headers": {
            **chatter.headers,
            "X-CSRFToken": chatter.csrf,
            "HX-Request": "true",
            "Content-Type": "application/x-www-form-urlencoded",
        },
        "body": body,
        "then": {"path": STREAM_PATH.pattern, "headers": chatter.headers},
    }
