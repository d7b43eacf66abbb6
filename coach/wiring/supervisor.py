"""The run command: every process of the app, under one supervisor, on this machine.

    python -m coach.wiring.supervisor [--port 8000]
    python -m coach.wiring.supervisor --manage createsuperuser

Writes development secrets to `.env` the first time, starts PostgreSQL and Redis where
their URLs are unset (data kept in `.data/`), migrates, then runs the web app (uvicorn,
ASGI), a Celery worker, Celery beat and, without OPENAI_API_KEY, the offline coach.
Ctrl-C stops every process it started, gently: the web process finishes and saves the
replies it is writing, the worker finishes its tasks (or hands them back). Anything else
that dies (the worker, beat, the offline coach, the web app once it has answered, the
local PostgreSQL or Redis) is started again, alone, with a growing pause between tries;
only Ctrl-C, or a web app that never starts, stops everything.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from coach.wiring.localservices import LocalService, LocalServiceError, start_missing_services, stop_services
from coach.wiring.run_environment import (
    AlreadyRunning,
    app_is_running,
    ensure_env_file,
    hold_run_lock,
    load_env_file,
    settings_environment,
)
from coach.wiring.web_server import READERS_GRACE_SECONDS, web_server_argv
from infra.environment import DEFAULT_OFFLINE_COACH_URL, local_address
from infra.health import postgres_problem, redis_problem

BASE_DIR = Path(__file__).resolve().parents[2]
DATA_DIR = BASE_DIR / ".data"
ENV_FILE = BASE_DIR / ".env"
# Beyond those, what a stopping process gets before it is killed.
STOP_MARGIN_SECONDS = 15.0
# Between tries to bring back a process or local service that died: doubling, up to the last.
RESTART_PAUSES_SECONDS = (0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
# A process that has run this long since its last start is well again: its pauses start over.
STABLE_AFTER_SECONDS = 60.0


def restart_pause(failures: int) -> float:
    """How long to wait before the next start, after `failures` in a row: longer each time."""
    return RESTART_PAUSES_SECONDS[min(failures, len(RESTART_PAUSES_SECONDS) - 1)]


@dataclass(frozen=True)
class ProcessSpec:
    name: str
    argv: list[str]


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run the whole app on this machine.")
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR, help="local services' data (default .data/)")
    parser.add_argument("--env-file", type=Path, default=ENV_FILE, help="development settings (default .env)")
    parser.add_argument(
        "--manage",
        nargs=argparse.REMAINDER,
        metavar="COMMAND",
        help="instead of running the app, run one manage.py command with the same settings and services",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    data_dir: Path = args.data_dir.resolve()

    os.chdir(BASE_DIR)
    data_dir.mkdir(parents=True, exist_ok=True)
    running_env = data_dir / "running.env"
    if args.manage is not None:
        lock = None
        if app_is_running(data_dir) and running_env.exists():
            # Beside a running app: exactly its settings (its PostgreSQL and Redis, its mail
            # server, its model), whatever this shell or .env says.
            load_env_file(running_env, override=True)
    else:
        try:
            lock = hold_run_lock(data_dir / "run.lock")
        except AlreadyRunning as error:
            return fail(str(error))

    if ensure_env_file(args.env_file):
        say(f"wrote development secrets to {args.env_file.name} (git-ignored); keep it to keep your data readable")
    load_env_file(args.env_file)

    try:
        services = start_missing_services(data_dir, redis_password=os.environ.get("LOCAL_REDIS_PASSWORD"))
    except LocalServiceError as error:
        return fail(str(error))
    for service in services:
        say(f"started a local {service.name} (data in {data_dir / service.name})")
    if lock is not None:
        # What the app's processes read: SITE_URL follows them in development.
        os.environ["HOST"], os.environ["PORT"] = args.host, str(args.port)
        # This run's offline coach proves itself with it (infra/offline_coach_identity.py).
        os.environ["OFFLINE_COACH_TOKEN"] = secrets.token_urlsafe(32)
        running_env.write_text(settings_environment())
        running_env.chmod(0o600)

    try:
        if problem := preflight(starting_the_app=args.manage is None):
            return fail(problem)
        if args.manage is not None:
            return subprocess.call([sys.executable, "manage.py", *args.manage])
        if subprocess.call([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"]) != 0:
            return fail("migrations failed (see above)")
        # The address SITE_URL has in development: the links in mail open where this says.
        url = local_address(args.host, args.port) + "/"
        return supervise(app_processes(args.host, args.port, data_dir), url=url, services=services)
    finally:
        stop_services(services)
        if lock is not None:
            running_env.unlink(missing_ok=True)
            lock.close()


def preflight(*, starting_the_app: bool = True) -> str | None:
    """One line naming what does not answer, or what is in the way, before anything starts
    (a command run beside the app leaves its offline coach's port alone)."""
    if problem := postgres_problem(os.environ["DATABASE_URL"]):
        return f"PostgreSQL at DATABASE_URL does not answer: {problem}"
    if problem := redis_problem(os.environ["REDIS_URL"]):
        return f"Redis at REDIS_URL does not answer: {problem}"
    offline_url = offline_coach_wanted(os.environ) if starting_the_app else None
    if offline_url is not None and _listened_on(offline_url):
        # Whatever holds it would be sent the prompts (the app refuses to: it cannot prove
        # it is the offline coach), and the offline coach could not start.
        return (
            f"another process already listens at {offline_url}, where the offline coach is to answer: "
            "stop it, or set OFFLINE_COACH_URL to a free port"
        )
    return None


def _listened_on(url: str) -> bool:
    where = urlsplit(url)
    try:
        with socket.create_connection((where.hostname or "127.0.0.1", where.port or 80), timeout=1):
            return True
    except OSError:
        return False


def app_processes(host: str, port: int, data_dir: Path) -> list[ProcessSpec]:
    python = sys.executable
    # The console is where a newcomer finds the link of their sign-up mail: Celery's banners
    # and the scheduler's tick every few seconds show only at LOG_LEVEL=DEBUG (each task's
    # receipt and success, likewise: coach/wiring/settings.py). Warnings and errors always show.
    debugging = os.environ.get("LOG_LEVEL", "").upper() == "DEBUG"
    celery = [python, "-m", "celery", "-A", "coach.wiring", *([] if debugging else ["--quiet"])]
    scheduler_level = "INFO" if debugging else "WARNING"
    specs = [
        # As many processes as WEB_PROCESSES says, each with its connection limit (coach/wiring/web_server.py).
        ProcessSpec("web", web_server_argv("--host", host, "--port", str(port))),
        ProcessSpec("worker", [*celery, "worker", "--loglevel", "INFO"]),
        ProcessSpec(
            "beat",
            [*celery, "beat", "--loglevel", scheduler_level, "--schedule", str(data_dir / "celerybeat-schedule")],
        ),
    ]
    if (offline_url := offline_coach_wanted(os.environ)) is not None:
        where = urlsplit(offline_url)
        coach_host, coach_port = where.hostname or "127.0.0.1", str(where.port or 80)
        specs.append(ProcessSpec("coach", [python, "-m", "offline_coach", "--host", coach_host, "--port", coach_port]))
    return specs


def offline_coach_wanted(env: Mapping[str, str]) -> str | None:
    """Where the offline coach is to serve, when the app talks to it: for the chat (no key
    and no other server named, as coach/wiring/settings.py reads them) or for embeddings alone
    (EMBEDDING_BASE_URL names it, beside a chat server that serves none). None when the app
    talks to other servers only: the offline coach must not take a real server's port."""
    offline = env.get("OFFLINE_COACH_URL") or DEFAULT_OFFLINE_COACH_URL
    chat = env.get("OPENAI_BASE_URL") or (None if env.get("OPENAI_API_KEY") else offline)
    embeddings = env.get("EMBEDDING_BASE_URL") or chat
    return offline if offline in (chat, embeddings) else None


def supervise(specs: list[ProcessSpec], *, url: str, services: Sequence[LocalService] = ()) -> int:
    """Start every process, relay their output, bring back whatever dies, and stop them all
    on Ctrl-C, or when the web app exits before it ever answered (it cannot start)."""
    stopping = threading.Event()

    def request_stop(signum: int, frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)

    width = max(len(spec.name) for spec in specs)
    children = {spec.name: _Child(spec, label=spec.name.ljust(width)) for spec in specs}
    for child in children.values():
        child.start()

    keeper = _ServiceKeeper(services)
    announced = False
    exit_code = 0
    while not stopping.is_set():
        if not announced and answers(url + "healthz"):
            say(f"the app is running at {url}  (Ctrl-C stops everything)")
            announced = True
        keeper.check()
        for name, child in children.items():
            if name == "web" and not announced and child.exited():
                say(f"web exited with code {child.process.returncode} before it answered; stopping the others")
                exit_code = 1
                stopping.set()
                break
            child.keep_up()
        stopping.wait(0.2)

    say("stopping (replies being written are finished first)...")
    stop_gently({name: child.process for name, child in children.items()})
    say("stopped")
    return exit_code


class _Child:
    """One of the app's processes, started again (alone) when it dies, after a pause that
    grows while it keeps dying and starts over once it has run well for a while."""

    def __init__(self, spec: ProcessSpec, *, label: str) -> None:
        self.spec = spec
        self.label = label
        self.process: subprocess.Popen[bytes]
        self._failures = 0
        self._started_at = 0.0
        self._restart_at: float | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            self.spec.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            # Own session: Ctrl-C reaches only the supervisor, which stops children in order.
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._started_at = time.monotonic()
        threading.Thread(target=relay, args=(self.label, self.process), daemon=True).start()

    def exited(self) -> bool:
        return self.process.poll() is not None

    def keep_up(self) -> None:
        now = time.monotonic()
        if not self.exited():
            if self._failures and now - self._started_at > STABLE_AFTER_SECONDS:
                self._failures = 0
            return
        if self._restart_at is None:
            pause = restart_pause(self._failures)
            self._failures += 1
            self._restart_at = now + pause
            say(f"{self.spec.name} exited with code {self.process.returncode}; starting it again in {pause:g} s")
        elif now >= self._restart_at:
            self._restart_at = None
            self.start()
            say(f"{self.spec.name} started again (pid {self.process.pid})")


def stop_gently(running: dict[str, subprocess.Popen[bytes]]) -> None:
    """SIGTERM to each process itself, not its group: uvicorn then finishes and saves the
    replies it is writing, and Celery's worker its tasks (its pool's children would die
    mid-task if they got the signal too). The offline coach goes last, once the web
    process, whose replies it may be writing, is gone. Whatever outstays its time is killed."""
    grace = float(os.environ.get("SHUTDOWN_GRACE_SECONDS", "30"))
    deadline = time.monotonic() + READERS_GRACE_SECONDS + grace + STOP_MARGIN_SECONDS
    order = [[name for name in running if name != "coach"], [name for name in running if name == "coach"]]
    for names in order:
        for name in names:
            if running[name].poll() is None:
                running[name].send_signal(signal.SIGTERM)
        for name in names:
            process = running[name]
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                say(f"{name} did not stop in time; killing it")
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


class _ServiceKeeper:
    """Brings back a local PostgreSQL or Redis that died, at the same address, so the app's
    processes reconnect by themselves; tries again after a growing pause when it fails."""

    def __init__(self, services: Sequence[LocalService]) -> None:
        self._services = list(services)
        self._failures: dict[str, int] = {}
        self._next_try: dict[str, float] = {}

    def check(self) -> None:
        for service in self._services:
            if service.alive() or time.monotonic() < self._next_try.get(service.name, 0.0):
                continue
            failures = self._failures.get(service.name, 0)
            say(f"the local {service.name} stopped; starting it again" + (f" (try {failures + 1})" if failures else ""))
            try:
                service.restart()
            except Exception as error:  # whatever it was, the next try may work
                pause = restart_pause(failures)
                self._failures[service.name] = failures + 1
                self._next_try[service.name] = time.monotonic() + pause
                say(f"{error}; trying again in {pause:g} s")
                continue
            self._failures.pop(service.name, None)
            say(f"the local {service.name} is back at the same address")


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            ok: bool = response.status == 200
            return ok
    except OSError:
        return False


def relay(label: str, process: subprocess.Popen[bytes]) -> None:
    assert process.stdout is not None
    for line in iter(process.stdout.readline, b""):
        sys.stdout.write(f"{label} | {line.decode(errors='replace')}")
        sys.stdout.flush()


def say(message: str) -> None:
    print(f"coach: {message}", flush=True)


def fail(message: str) -> int:
    print(f"coach: error: {message}", file=sys.stderr, flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
