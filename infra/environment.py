"""Reading settings from the environment, with one-line errors that name the variable."""

from __future__ import annotations

import os

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
