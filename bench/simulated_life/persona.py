"""A persona: who the simulated person is, and what they say week by week.

A persona is a YAML or JSON file (bench/personas/README.md describes the format). Each
message may carry labelled facts: what a good memory must do with what was said. The
loader checks every field and names what is wrong, so any file in the format runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date, time
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
FREQUENCIES = ("weekly", "twice_weekly", "off")
# What a good memory must do with a fact.
KEEP, REPLACE, RAISE, NOTHING = "keep", "replace", "raise", "nothing"


class PersonaError(ValueError):
    """The persona file is not in the format; the message says where and why."""


@dataclass(frozen=True)
class Fact:
    """A fact a message states, and what a good memory must do with it.

    keep: `look_for` is in every memory block from then on (`safety` ones make the
    safety-recall figure); replace: from then on the block holds `look_for` and none of
    `old`; raise: an intention due on `due`, checked in on once before it; nothing: small
    talk, nothing need be kept."""

    does: str
    look_for: str = ""
    safety: bool = False
    old: tuple[str, ...] = ()
    due: date | None = None


@dataclass(frozen=True)
class Step:
    """One thing the person does in a session: say something, or unsubscribe."""

    say: str = ""
    facts: tuple[Fact, ...] = ()
    unsubscribe: bool = False


@dataclass(frozen=True)
class Persona:
    name: str
    start: date
    time_zone: str
    email_frequency: str
    session_summaries: bool
    quiet_start: time
    quiet_end: time
    session_days: tuple[int, ...]
    session_at: time
    jitter_minutes: int
    minutes_between_messages: int
    small_talk: tuple[str, ...]
    weeks: dict[int, tuple[Step, ...]] = field(default_factory=dict)

    def week(self, number: int) -> tuple[Step, ...]:
        return self.weeks.get(number, ())


def load_persona(path: Path) -> Persona:
    """Read and check a persona file (.yaml, .yml or .json)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise PersonaError(f"{path}: cannot be read ({error.strerror})") from error
    try:
        raw = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        raise PersonaError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {error}") from error
    try:
        return _persona(_mapping(raw, "the file"))
    except PersonaError as error:
        raise PersonaError(f"{path}: {error}") from error


def _persona(raw: dict[str, Any]) -> Persona:
    email = _mapping(raw.get("email", {}), "email")
    sessions = _mapping(raw.get("sessions", {}), "sessions")
    quiet = email.get("quiet_hours", ["21:00", "08:00"])
    if not isinstance(quiet, list) or len(quiet) != 2:
        raise PersonaError('email.quiet_hours must be two times, e.g. ["21:00", "08:00"]')
    frequency = email.get("frequency", "weekly")
    if frequency not in FREQUENCIES:
        raise PersonaError(f"email.frequency must be one of {', '.join(FREQUENCIES)}, not {frequency!r}")
    days = sessions.get("days", ["mon", "wed", "sat"])
    if not isinstance(days, list) or not days or any(str(day).lower()[:3] not in WEEKDAYS for day in days):
        raise PersonaError(f"sessions.days must list weekdays (mon ... sun), not {days!r}")
    small_talk = raw.get("small_talk", [])
    if not isinstance(small_talk, list) or not small_talk or not all(isinstance(s, str) and s for s in small_talk):
        raise PersonaError("small_talk must list at least one message (said in sessions with nothing else to say)")
    weeks = _mapping(raw.get("weeks", {}), "weeks")
    return Persona(
        name=_text(raw.get("name"), "name"),
        start=_date(raw.get("start"), "start"),
        time_zone=_zone(raw.get("time_zone")),
        email_frequency=frequency,
        session_summaries=_boolean(email.get("session_summaries", False), "email.session_summaries"),
        quiet_start=_time(quiet[0], "email.quiet_hours"),
        quiet_end=_time(quiet[1], "email.quiet_hours"),
        session_days=tuple(sorted({WEEKDAYS.index(str(day).lower()[:3]) for day in days})),
        session_at=_time(sessions.get("at", "19:00"), "sessions.at"),
        jitter_minutes=_number(sessions.get("jitter_minutes", 0), "sessions.jitter_minutes"),
        minutes_between_messages=_number(
            sessions.get("minutes_between_messages", 2), "sessions.minutes_between_messages"
        )
        or 1,
        small_talk=tuple(small_talk),
        weeks={_week_number(key): _steps(value, f"weeks.{key}") for key, value in weeks.items()},
    )


def _steps(raw: Any, where: str) -> tuple[Step, ...]:
    if not isinstance(raw, list):
        raise PersonaError(f"{where} must be a list of messages")
    return tuple(_step(item, f"{where}[{index}]") for index, item in enumerate(raw))


def _step(raw: Any, where: str) -> Step:
    if isinstance(raw, str) and raw.strip():
        return Step(say=raw)
    item = _mapping(raw, where)
    if item.get("do") == "unsubscribe":
        return Step(unsubscribe=True)
    if "do" in item:
        raise PersonaError(f"{where}: the only action is `do: unsubscribe`, not {item['do']!r}")
    facts = item.get("facts", [item["fact"]] if "fact" in item else [])
    if not isinstance(facts, list):
        raise PersonaError(f"{where}.facts must be a list")
    return Step(
        say=_text(item.get("say"), f"{where}.say"),
        facts=tuple(_fact(fact, f"{where}.facts[{index}]") for index, fact in enumerate(facts)),
    )


def _fact(raw: Any, where: str) -> Fact:
    if raw == NOTHING:
        return Fact(NOTHING)
    item = _mapping(raw, where)
    kinds = [kind for kind in (KEEP, REPLACE, RAISE, NOTHING) if kind in item]
    if len(kinds) != 1:
        raise PersonaError(f"{where}: say exactly one of keep, replace, raise or nothing")
    does = kinds[0]
    if does == NOTHING:
        return Fact(NOTHING)
    look_for = _text(item.get("look_for"), f"{where}.look_for")
    if does == KEEP:
        if item[KEEP] not in ("safety", "fact"):
            raise PersonaError(f"{where}.keep must be `safety` or `fact`, not {item[KEEP]!r}")
        return Fact(KEEP, look_for=look_for, safety=item[KEEP] == "safety")
    if does == REPLACE:
        old = item[REPLACE]
        old = [old] if isinstance(old, str) else old
        if not isinstance(old, list) or not old or not all(isinstance(o, str) and o for o in old):
            raise PersonaError(f"{where}.replace must name the old value (a text, or a list of texts)")
        return Fact(REPLACE, look_for=look_for, old=tuple(old))
    return Fact(RAISE, look_for=look_for, due=_date(item[RAISE], f"{where}.raise"))


def _mapping(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise PersonaError(f"{where} must be a mapping of names to values")
    return raw


def _text(raw: Any, where: str) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise PersonaError(f"{where} must be a non-empty text")
    return raw.strip()


def _boolean(raw: Any, where: str) -> bool:
    if not isinstance(raw, bool):
        raise PersonaError(f"{where} must be true or false")
    return raw


def _number(raw: Any, where: str) -> int:
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < 0:
        raise PersonaError(f"{where} must be a whole number, 0 or more")
    return raw


def _week_number(raw: Any) -> int:
    try:
        number = int(raw)
    except (TypeError, ValueError):
        number = 0
    if number < 1:
        raise PersonaError(f"weeks: {raw!r} is not a week number (1, 2, ...)")
    return number


def _date(raw: Any, where: str) -> date:
    if isinstance(raw, date):
        return raw
    try:
        return date.fromisoformat(str(raw))
    except ValueError as error:
        raise PersonaError(f"{where} must be a date like 2026-01-05, not {raw!r}") from error


def _time(raw: Any, where: str) -> time:
    try:
        return time.fromisoformat(str(raw))
    except ValueError as error:
        raise PersonaError(f"{where} must hold times like 07:30, not {raw!r}") from error


def _zone(raw: Any) -> str:
    try:
        ZoneInfo(str(raw))
    except (ZoneInfoNotFoundError, ValueError) as error:
        raise PersonaError(f"time_zone must be a zone like Europe/London, not {raw!r}") from error
    return str(raw)
