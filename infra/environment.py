"""Reading settings from the environment, with one-line errors that name the variable."""

from __future__ import annotations

import os

from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

# Where the offline coach answers when there is no OPENAI_API_KEY: the settings point the
# app there, and the run command starts it there.
DEFAULT_OFFLINE_COACH_URL = "http://127.0.0.1:8001/v1"

TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off", ""})


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def env_bool(name: str, *, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, not {raw!r}.")


def env_int(name: str, *, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, not {raw!r}.") from None


def env_float(name: str, *, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, not {raw!r}.") from None


def env_list(name: str, *, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_required(name: str, *, why: str) -> str:
    """A value the app cannot start without; there is deliberately no default."""
    value = env_str(name)
    if not value:
        raise ImproperlyConfigured(f"{name} is not set: {why}")
    return value


SECRET_MIN_BYTES = 32


def env_secret(name: str, *, why: str, min_bytes: int = SECRET_MIN_BYTES) -> str:
    """A required secret of at least `min_bytes`: a short one is refused at start, not
    trusted (a guessable key signs sessions, or keys the lookup digests)."""
    value = env_required(name, why=why)
    if len(value.encode()) < min_bytes:
        raise ImproperlyConfigured(f"{name} is too short: it must be at least {min_bytes} random bytes; {why}")
    return value


def env_fernet_keys(name: str, *, why: str) -> list[str]:
    """A required comma-separated list of Fernet keys, each checked to be one at start (a
    bad key would otherwise fail only at the first encryption, with the app serving)."""
    keys = [key.strip() for key in env_required(name, why=why).split(",") if key.strip()]
    for number, key in enumerate(keys, start=1):
        try:
            Fernet(key)
        except ValueError:
            raise ImproperlyConfigured(
                f"{name} holds something that is not a Fernet key (key {number} of {len(keys)}): {why}"
            ) from None
    if not keys:
        raise ImproperlyConfigured(f"{name} is not set: {why}")
    return keys


# Addresses that mean "every interface": a browser on this machine reaches them at loopback.
EVERY_INTERFACE = frozenset({"", "0.0.0.0", "::"})  # noqa: S104


def local_address(host: str, port: int) -> str:
    """The address a browser on this machine opens for an app served on `host`:`port`. The
    run command prints it and development's SITE_URL is it, so the link in a sign-up mail
    opens where the person signed up: a session cookie set on 127.0.0.1 is not sent to
    localhost, and the person would have to sign in again."""
    host = "127.0.0.1" if host in EVERY_INTERFACE else host
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"
