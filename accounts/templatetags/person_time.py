"""Dates and times as the person reads them: on their own clock, with its zone named.

Every date or time a page shows goes through these tags, so none is shown in the
server's zone, and none is shown without the person being able to tell which zone it is:

    {% person_time email.sent_at %}   -> 15 Jan 2026, 13:45 Chatham time
    {% person_date memory.created_at %} -> 15 Jan 2026 (the zone and the time in its title)
    {% person_zone %}                  -> Chatham time (Pacific/Chatham)
    {% person_zone short=True %}       -> Chatham time

The zone is the signed-in person's (User.time_zone); UTC for anyone else.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from django import template
from django.utils import dateformat
from django.utils.html import format_html
from django.utils.safestring import SafeString

from accounts.time_zones import known_zone, readable, zone_label

register = template.Library()

DATE_FORMAT = "j M Y"
TIME_FORMAT = "j M Y, H:i"


@register.simple_tag(takes_context=True)
def person_time(context: template.Context, value: datetime | None, pattern: str = TIME_FORMAT) -> SafeString | str:
    """A moment to the minute, on the person's clock, its zone named beside it."""
    if value is None:
        return ""
    zone = _zone(context)
    local = value.astimezone(ZoneInfo(zone))
    return format_html(
        '<time datetime="{}" title="{}">{} <span class="zone">{}</span></time>',
        value.isoformat(),
        readable(zone),
        dateformat.format(local, pattern),
        zone_label(zone),
    )


@register.simple_tag(takes_context=True)
def person_date(
    context: template.Context, value: datetime | date | None, pattern: str = DATE_FORMAT
) -> SafeString | str:
    """A day, as the person's clock had it; the exact time and its zone in the title."""
    if value is None:
        return ""
    if not isinstance(value, datetime):
        # A calendar day is the same on every clock.
        return dateformat.format(value, pattern)
    zone = _zone(context)
    local = value.astimezone(ZoneInfo(zone))
    return format_html(
        '<time datetime="{}" title="{}, {}">{}</time>',
        value.isoformat(),
        dateformat.format(local, TIME_FORMAT),
        zone_label(zone),
        dateformat.format(local, pattern),
    )


@register.simple_tag(takes_context=True)
def person_zone(context: template.Context, *, short: bool = False) -> str:
    """The person's zone, named: "Chatham time (Pacific/Chatham)", or "UTC"; `short`:
    "Chatham time"."""
    zone = _zone(context)
    label = zone_label(zone)
    return label if short or label == zone else f"{label} ({readable(zone)})"


def _zone(context: template.Context) -> str:
    user: Any = context.get("user")
    if user is None and (request := context.get("request")) is not None:
        user = getattr(request, "user", None)
    # A zone this machine no longer knows: shown in UTC, and labelled so.
    return known_zone(getattr(user, "time_zone", ""))
