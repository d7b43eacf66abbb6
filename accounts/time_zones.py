"""The time zones a person picks from, and how a zone is named to them.

The list is the tz database's own list of places (zone.tab: at least one zone a country,
named by a city), grouped by region, each with its country so "Norway" finds Oslo. The
legacy aliases the database also carries (US/Pacific, Etc/GMT+3, EST, Asia/Calcutta...)
are left out of the list; a name a browser or an older account still uses is read as the
place it stands for. UTC stays, first.

What the tz database holds does not change while a process runs, so the list, its places
and the names it knows are read once, as this module is imported (a web process imports
it before its first request): asking which names are zones scans the whole database on
disk, which once cost a fresh process's first account page tens of seconds, once per zone.
"""

from __future__ import annotations

import zoneinfo
from functools import cache
from pathlib import Path

UTC_NAME = "UTC"
REGIONS = ("Africa", "America", "Antarctica", "Arctic", "Asia", "Atlantic", "Australia", "Europe", "Indian", "Pacific")


def readable(name: str) -> str:
    """A zone's name as a person reads it: "America/Argentina/Buenos Aires"."""
    return name.replace("_", " ")


def zone_place(name: str) -> str:
    """The place a zone is named for: "Buenos Aires" for America/Argentina/Buenos_Aires."""
    return readable(name.rsplit("/", 1)[-1])


def zone_label(name: str) -> str:
    """How a time in this zone is labelled: "Chatham time", or "UTC"."""
    return name if "/" not in name else f"{zone_place(name)} time"


def is_zone(name: str) -> bool:
    """Whether `name` is a zone this machine knows, alias or not."""
    return name in _zones()


def known_zone(name: str) -> str:
    """`name` if this machine knows the zone, else UTC (an empty name, or one the tz
    database no longer carries)."""
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return UTC_NAME
    return name


def canonical_zone(name: str) -> str | None:
    """The pickable zone `name` stands for (itself, or the place an alias links to); a
    real zone with no pickable place stays as it is; None for a name that is no zone."""
    if name in _pickable():
        return name
    if not is_zone(name):
        return None
    target = _links().get(name, name)
    if target == "Etc/UTC":
        return UTC_NAME
    return target if target in _pickable() else name


def zone_choices(*, current: str = "") -> list[tuple[str, object]]:
    """The picker's choices: UTC, then one group a region ("America": [(zone, "New York,
    United States"), ...]), places in alphabetical order. A `current` zone the list does
    not hold (an alias kept on an older account) is offered too, so it is never lost."""
    choices: list[tuple[str, object]] = [(UTC_NAME, UTC_NAME)]
    if current and current != UTC_NAME and current not in _pickable() and is_zone(current):
        choices.append((current, readable(current)))
    return choices + list(_regions())


@cache
def _regions() -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    """Each region with its places, labelled and in alphabetical order: the same for everyone."""
    grouped: dict[str, list[tuple[str, str]]] = {region: [] for region in REGIONS}
    for name, country in _places().items():
        grouped[name.split("/", 1)[0]].append((name, _place_label(name, country)))
    return tuple(
        (region, tuple(sorted(places, key=lambda choice: choice[1]))) for region, places in grouped.items() if places
    )


def _place_label(name: str, country: str) -> str:
    # "Oslo, Norway"; "Knox (Indiana), United States"; "Buenos Aires, Argentina", whose
    # zone name holds the country already.
    *within, city = readable(name).split("/")[1:]
    area = " / ".join(part for part in within if part != country)
    place = f"{city} ({area})" if area else city
    return f"{place}, {country}" if country else place


@cache
def _zones() -> frozenset[str]:
    """Every zone name this machine knows, aliases included: a scan of the database on disk."""
    return frozenset(zoneinfo.available_timezones())


@cache
def _pickable() -> frozenset[str]:
    return frozenset(_places()) | {UTC_NAME}


@cache
def _places() -> dict[str, str]:
    """Each place's zone and its country's name (several countries share a few zones)."""
    countries = dict(_rows("iso3166.tab", columns=2))
    places: dict[str, list[str]] = {}
    for codes, _coordinates, name, *_ in _rows("zone.tab", columns=3):
        if name.split("/", 1)[0] in REGIONS and is_zone(name):
            places.setdefault(name, []).extend(countries.get(code, code) for code in codes.split(","))
    if not places:
        # A system without the tz database's tables: every zone under a region, which
        # still leaves out the US/..., Etc/... and three-letter aliases.
        return {name: "" for name in sorted(_zones()) if name.split("/", 1)[0] in REGIONS}
    return {name: ", ".join(dict.fromkeys(names)) for name, names in sorted(places.items())}


@cache
def _links() -> dict[str, str]:
    """Each alias and the zone it links to, from the compiled database's "L" lines."""
    links = {}
    for fields in _rows("tzdata.zi", columns=3, separator=None):
        if fields[0] == "L":
            links[fields[2]] = fields[1]
    return links


def _rows(filename: str, *, columns: int, separator: str | None = "\t") -> list[list[str]]:
    for folder in zoneinfo.TZPATH:
        path = Path(folder) / filename
        if path.is_file():
            lines = path.read_text(encoding="utf-8").splitlines()
            rows = (line.split(separator) for line in lines if line and not line.startswith("#"))
            return [row for row in rows if len(row) >= columns]
    return []


# Read now, once: see the module's docstring.
_regions()
_links()
