"""The chat under load, against real uvicorn processes: many replies streamed at once,
readers arriving mid-reply, two processes reading one reply; and the model alone under the
same load, to set the app's figures against. Each load is driven from a client process of
its own (bench/stream_client.py), so the client's work is not the app's.

Imported by bench/chat.py once Django is set up.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from django.test import Client

from bench.chat_people import REPLY, STREAM_SECONDS, person
from bench.web_app import cpu_seconds, production_env, uvicorn_started
from coach.models import Message
from coach.services import message_post, session_start
from offline_coach import ModelServer


def web_process(server: ModelServer, port: int) -> subprocess.Popen[bytes]:
    """A uvicorn process of the app, as production runs it; returns once it answers."""
    env = production_env(
        port=port,
        OPENAI_BASE_URL=server.base_url,
        OPENAI_API_KEY="bench",
        # A benchmark person reloads far more often than any limit lets a real one.
        COACH_MAX_OPEN_STREAMS="100000",
        # Stopped between measurements mid-reply: the replies it is writing need not be
        # finished (a production stop waits up to 30 s for them).
        SHUTDOWN_GRACE_SECONDS="1",
    )
    return uvicorn_started(env, port)


def waiting_messages(prefix: str, count: int) -> list[tuple[str, str, Message]]:
    """(reply path, session cookie, message) for `count` people with a message each, not yet
    answered: the first reader to ask for its reply starts its turn."""
    targets = []
    for n in range(count):
        user = person(f"{prefix}-{n}@example.com", 0)
        session = session_start(user=user)
        message = message_post(session=session, text=f"Plan my week, please ({n})", client_id=None)
        client = Client()
        client.force_login(user)
        path = f"/chat/{session.pk}/messages/{message.pk}/reply"
        targets.append((path, client.cookies["sessionid"].value, message))
    return targets


def measure_concurrent_streams(server: ModelServer, streams: int, ramp_seconds: float, processes: int = 1) -> dict:
    """`processes` uvicorn processes; `streams` replies in flight together, each streamed by
    the model over 2 s, the conversations opening evenly over `ramp_seconds` (0: all at
    once) and spread over the processes in turn, each reply read once."""
    ports = [8765 + n for n in range(processes)]
    web = [web_process(server, port) for port in ports]
    try:
        targets = waiting_messages(f"stream{processes}", streams)
        words = REPLY.split(" ")
        for _ in range(streams):
            # The first words go out at once; the rest take the model 2 seconds.
            server.queue_text(REPLY, chunk_delay_seconds=STREAM_SECONDS / len(words))
        cpu_before = sum(cpu_seconds(process.pid) for process in web)
        began = time.perf_counter()
        plan = {
            "port": ports[0],
            "gap": ramp_seconds / streams,
            "first_words": "^event: text",
            "requests": [
                {
                    "method": "GET",
                    "path": path,
                    "headers": {"Cookie": f"sessionid={cookie}"},
                    "port": ports[n % processes],
                }
                for n, (path, cookie, _) in enumerate(targets)
            ],
        }
        results = _follow_in_own_process(plan)
        wall = time.perf_counter() - began
        app_cpu = sum(cpu_seconds(process.pid) for process in web) - cpu_before
    finally:
        for process in web:
            process.terminate()
            process.wait(timeout=30)
    firsts = sorted(first * 1000 for first, _, _ in results)
    return {
        "completed": sum(done for _, _, done in results),
        "first_p50": statistics.median(firsts),
        "first_p95": firsts[int(len(firsts) * 0.95) - 1],
        "wall": wall,
        "app_cpu": app_cpu,
    }


def measure_reload(server: ModelServer, replies: int, readers: int) -> dict:
    """`replies` being written slowly (20 s each) in one uvicorn process; `readers` arrive
    one after another mid-reply, as reloads and second tabs do, each leaving at its first
    words: the time from asking to seeing the words so far."""
    port = 8765
    process = web_process(server, port)
    try:
        targets = waiting_messages("reload", replies)
        for _ in targets:
            server.queue_text(" ".join(["word"] * 200), chunk_delay_seconds=0.1)
        started = {
            "port": port,
            "gap": 0.01,
            "first_words": "^event: text",
            "hang_up_at_first_words": True,
            "requests": [
                {"method": "GET", "path": path, "headers": {"Cookie": f"sessionid={cookie}"}}
                for path, cookie, _ in targets
            ],
        }
        _follow_in_own_process(started)
        plan = {**started, "gap": 0.02, "requests": [started["requests"][n % replies] for n in range(readers)]}
        firsts = sorted(first * 1000 for first, _, _ in _follow_in_own_process(plan))
    finally:
        process.terminate()
        process.wait(timeout=30)
    return {"p50": statistics.median(firsts), "p95": firsts[int(len(firsts) * 0.95) - 1]}


def measure_two_processes(server: ModelServer, replies: int, ramp_seconds: float) -> dict:
    """`replies` 2-second replies, each read by one reader on each of two uvicorn processes."""
    ports = (8765, 8766)
    processes = [web_process(server, port) for port in ports]
    try:
        targets = waiting_messages("pair", replies)
        words = REPLY.split(" ")
        requests_before = len(server.chat_requests())
        for _ in targets:
            server.queue_text(REPLY, chunk_delay_seconds=STREAM_SECONDS / len(words))
        plan = {
            "port": ports[0],
            "gap": ramp_seconds / (2 * replies),
            "first_words": "^event: text",
            "requests": [
                {"method": "GET", "path": path, "headers": {"Cookie": f"sessionid={cookie}"}, "port": port}
                for path, cookie, _ in targets
                for port in ports
            ],
        }
        began = time.perf_counter()
        results = _follow_in_own_process(plan)
        wall = time.perf_counter() - began
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)
    firsts = sorted(first * 1000 for first, _, _ in results)
    answers = Message.objects.filter(reply_to__in=[message for _, _, message in targets], status="complete")
    return {
        "completed": sum(done for _, _, done in results),
        "readers": len(results),
        "answered_once": answers.count() == replies == answers.values("reply_to").distinct().count(),
        "model_asked": len(server.chat_requests()) - requests_before,
        "first_p50": statistics.median(firsts),
        "first_p95": firsts[int(len(firsts) * 0.95) - 1],
        "wall": wall,
    }


def model_alone(server: ModelServer, streams: int, ramp_seconds: float) -> dict:
    """The same streams asked of the model directly: what it takes to say its first words
    under this load, to set against the figure through the app."""
    words = REPLY.split(" ")
    for _ in range(streams):
        server.queue_text(REPLY, chunk_delay_seconds=STREAM_SECONDS / len(words))
    body = json.dumps({"model": "offline-coach", "stream": True, "messages": [{"role": "user", "content": "Hi"}]})
    port = int(server.base_url.split(":")[2].split("/")[0])
    plan = {
        "port": port,
        "gap": ramp_seconds / streams,
        # A content delta with words in it; the opening chunk only names the role.
        "first_words": '"content": "[^"]',
        "requests": [
            {
                "method": "POST",
                "path": "/v1/chat/completions",
                "headers": {"Content-Type": "application/json"},
                "body": body,
            }
            for _ in range(streams)
        ],
    }
    firsts = sorted(first * 1000 for first, _, _ in _follow_in_own_process(plan))
    return {"first_p50": statistics.median(firsts), "first_p95": firsts[int(len(firsts) * 0.95) - 1]}


def _follow_in_own_process(plan: dict) -> list[tuple[float, float, bool]]:
    client = Path(__file__).resolve().parent / "stream_client.py"
    result = subprocess.run(
        [sys.executable, str(client)], input=json.dumps(plan), capture_output=True, text=True, timeout=300, check=True
    )
    return json.loads(result.stdout)
