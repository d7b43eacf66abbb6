"""Reading settings from the environment, with one-line errors that name the variable."""

from __future__ import annotations

import base64
import collections
import itertools
import math
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
# The least a secret's characters (or a key's bytes) must carry, estimated from how often
# each occurs in it. Below what random generators make (a 32-character hex secret carries
# about 116; the lowest of 200,000 made by secrets.token_hex(16) carried 92.6, of 200,000
# uuid4().hex 88.0): this catches what was typed or repeated, not a weak random one.
SECRET_MIN_ESTIMATED_BITS = 80
# One symbol this many times in a row: about one chance in ten million for a random
# 32-character hex secret, the likeliest to have one.
LONGEST_RUN = 8
NOT_RANDOM = "does not look random (a character or a run of them repeated, or counted up)"


def env_secret(name: str, *, why: str, min_bytes: int = SECRET_MIN_BYTES) -> str:
    """A required secret of at least `min_bytes` that looks random: a short one, or one
    made of repeats, is refused at start, not trusted (a guessable key signs sessions, or
    keys the lookup digests)."""
    value = env_required(name, why=why)
    if len(value.encode()) < min_bytes:
        raise ImproperlyConfigured(f"{name} is too short: it must be at least {min_bytes} random bytes; {why}")
    if not looks_random(value):
        raise ImproperlyConfigured(f"{name} {NOT_RANDOM}; {why}")
    return value


def env_fernet_keys(name: str, *, why: str) -> list[str]:
    """A required comma-separated list of Fernet keys, each checked at start to be one (a
    bad key would otherwise fail only at the first encryption, with the app serving), and
    to look random (an all-zero key is a valid Fernet key that anyone can guess)."""
    keys = [key.strip() for key in env_required(name, why=why).split(",") if key.strip()]
    for number, key in enumerate(keys, start=1):
        which = f"(key {number} of {len(keys)})"
        try:
            Fernet(key)
        except ValueError:
            raise ImproperlyConfigured(f"{name} holds something that is not a Fernet key {which}: {why}") from None
        if not looks_random(base64.urlsafe_b64decode(key)):
            raise ImproperlyConfigured(f"{name}: key {number} of {len(keys)} {NOT_RANDOM}: {why}")
    if not keys:
        raise ImproperlyConfigured(f"{name} is not set: {why}")
    return keys


def looks_random(secret: str | bytes) -> bool:
    """Whether `secret` could have come from a random generator: it is no run of symbols
    said again (`abab...`, `collectstaticcollect...`), has no symbol LONGEST_RUN times in
    a row (`...xxxxxxxx`), is not mostly counted up or down (`abcdef...`), and its symbols,
    by how often each occurs, carry at least SECRET_MIN_ESTIMATED_BITS."""
    symbols = list(secret) if isinstance(secret, bytes) else [ord(character) for character in secret]
    length = len(symbols)
    if length < 2 or any(symbols[period:] == symbols[:-period] for period in range(1, length // 2 + 1)):
        return False
    if max(len(list(run)) for _, run in itertools.groupby(symbols)) >= LONGEST_RUN:
        return False
    if sum(1 for a, b in itertools.pairwise(symbols) if abs(b - a) <= 1) * 4 > (length - 1) * 3:
        return False
    counts = collections.Counter(symbols).values()
    bits = -sum(count * math.log2(count / length) for count in counts)
    return bits >= SECRET_MIN_ESTIMATED_BITS


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
