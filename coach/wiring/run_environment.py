"""What the run command keeps on disk for a machine: the development secrets in `.env`,
which it writes once, and the lock that lets one app run from a folder at a time."""

from __future__ import annotations

import fcntl
import os
import re
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import IO

BASE_DIR = Path(__file__).resolve().parents[2]


class AlreadyRunning(RuntimeError):
    pass


def hold_run_lock(path: Path) -> IO[str]:
    handle = path.open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise AlreadyRunning(
            f"the app is already running from this folder (pid {holder}); stop it with Ctrl-C first"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


def app_is_running(data_dir: Path) -> bool:
    try:
        hold_run_lock(data_dir / "run.lock").close()
    except AlreadyRunning:
        return True
    return False


def ensure_env_file(path: Path) -> bool:
    """Write development secrets once, and any a newer version needs to an older file.
    Returns whether the file was created."""
    from cryptography.fernet import Fernet

    secrets_wanted: dict[str, Callable[[], str]] = {
        "DJANGO_SECRET_KEY": lambda: secrets.token_urlsafe(50),
        "FIELD_ENCRYPTION_KEYS": lambda: Fernet.generate_key().decode(),
        "FIELD_LOOKUP_KEY": lambda: secrets.token_urlsafe(48),
        # The password of the Redis the run command starts where REDIS_URL is unset.
        "LOCAL_REDIS_PASSWORD": lambda: secrets.token_urlsafe(32),
    }
    if path.exists():
        present = {line.split("=", 1)[0].strip() for line in path.read_text().splitlines() if "=" in line}
        missing = [name for name in secrets_wanted if name not in present]
        if missing:
            ends_a_line = path.read_text().endswith("\n") or not path.read_text()
            with path.open("a") as env:
                env.write("" if ends_a_line else "\n")
                env.writelines(f"{name}={secrets_wanted[name]()}\n" for name in missing)
        return False
    path.write_text(
        "# Development settings, written once by the run command. Git-ignored: keep it private.\n"
        "# Losing FIELD_ENCRYPTION_KEYS makes stored memories and messages unreadable.\n"
        "DJANGO_DEBUG=true\n" + "".join(f"{name}={make()}\n" for name, make in secrets_wanted.items())
    )
    path.chmod(0o600)
    return True


def settings_environment() -> str:
    """Every setting of the app (the variables .env.example documents) as this process
    has it, as KEY=VALUE lines: what a command run beside the app needs to act as it does."""
    documented = re.findall(r"^#?\s*([A-Z][A-Z0-9_]*)=", (BASE_DIR / ".env.example").read_text(), re.MULTILINE)
    return "".join(f"{name}={os.environ[name]}\n" for name in dict.fromkeys(documented) if name in os.environ)


def load_env_file(path: Path, *, override: bool = False) -> None:
    """KEY=VALUE lines into os.environ; variables already in the environment win, unless
    `override`."""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        if override:
            os.environ[key.strip()] = value.strip().strip("'\"")
        else:
            os.environ.setdefault(key.strip(), value.strip().strip("'\""))
