"""How one memory reads to the model: the same line in the prompt's memory block and in a
note of what changed during a conversation, so a model never has two forms to reconcile.

    - trip (3 Dec): You're going climbing on Kalymnos (due Jun 2027; raise it now)
    - injury-1 (by them, 20 Nov): A2 pulley injury, left ring finger.
      No max hangs until the physio clears it.

Plain lines, not JSON: a line costs the summary's own words and a few more. Metadata goes
in only where it changes what the model should do: the key (to recall or change it), the
date (how fresh it is), who wrote it when it was not the coach ("by them": the person's own
words, which only they change; "by support": staff), and for an intention when it is due
and where it stands. The full note follows its line, each of its lines indented,
so nothing in it can pass for a line, a heading or a marker of the block.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.utils.dateparse import parse_datetime

from memory.models import Memory, ProspectiveStatus, Source, Tier, author_for_model

INDENT = "  "


@dataclass(frozen=True)
class MemoryLine:
    """What a memory's line is made of: a stored memory, or one as an event recorded it."""

    key: str
    tier: str
    source: str
    summary: str
    content: str
    updated_on: date
    due_at: datetime | None = None
    due_month_only: bool = False
    status: str = ""
    raised_on: date | None = None

    @classmethod
    def of(cls, memory: Memory, zone: ZoneInfo) -> MemoryLine:
        return cls(
            key=memory.key,
            tier=memory.tier,
            source=memory.source,
            summary=memory.summary,
            content=memory.content,
            updated_on=memory.updated_at.astimezone(zone).date(),
            due_at=memory.due_at,
            due_month_only=memory.due_month_only,
            status=memory.status,
            raised_on=memory.raised_at.astimezone(zone).date() if memory.raised_at else None,
        )

    @classmethod
    def from_snapshot(cls, fields: dict[str, Any], *, on: date) -> MemoryLine:
        """A memory as an event's snapshot holds it, on the day of the event."""
        due = parse_datetime(fields["due_at"]) if fields.get("due_at") else None
        return cls(
            key=str(fields.get("key") or ""),
            tier=str(fields.get("tier") or ""),
            source=str(fields.get("source") or Source.COACH),
            summary=str(fields.get("summary") or ""),
            content=str(fields.get("content") or ""),
            updated_on=on,
            due_at=due,
            due_month_only=bool(fields.get("due_month_only")),
            status=str(fields.get("status") or ""),
        )


def index_line(memory: MemoryLine, *, today: date, zone: ZoneInfo, bring_up: bool = False) -> str:
    """The memory's one line: key, date and who wrote it if not the coach, its summary, and
    for an intention when it is due and where it stands."""
    marks = [day_said(memory.updated_on, today=today)]
    if memory.source != Source.COACH:
        marks.insert(0, f"by {author_for_model(memory.source)}")
    # A summary is one line (validate_draft folds its whitespace): it cannot start another.
    line = f"- {memory.key} ({', '.join(marks)}): {memory.summary}"
    if memory.tier == Tier.PROSPECTIVE:
        line += _intention(memory, today=today, zone=zone, bring_up=bring_up)
    return line


def whole_text(memory: MemoryLine, *, today: date, zone: ZoneInfo, bring_up: bool = False) -> str:
    """The memory's line with its full note beneath it, each line indented."""
    line = index_line(memory, today=today, zone=zone, bring_up=bring_up)
    if " ".join(memory.content.split()) == memory.summary:
        return line
    return "\n".join([line, *(INDENT + part for part in memory.content.splitlines() if part.strip())])


def day_said(day: date, *, today: date) -> str:
    """A date as a person writes it: "3 Dec", with the year when it is not this one."""
    return f"{day.day} {day:%b}" if day.year == today.year else f"{day.day} {day:%b %Y}"


def due_said(due_at: datetime, *, month_only: bool, zone: ZoneInfo) -> str:
    """When an intention is due, on the person's calendar: "Jun 2027", or "10 Jun 2027"."""
    local = due_at.astimezone(zone)
    return f"{local:%b %Y}" if month_only else f"{local.day} {local:%b %Y}"


def _intention(memory: MemoryLine, *, today: date, zone: ZoneInfo, bring_up: bool) -> str:
    if memory.status in (ProspectiveStatus.DONE, ProspectiveStatus.DISMISSED):
        return f" ({memory.status})"
    parts = []
    if memory.due_at is not None:
        parts.append(f"due {due_said(memory.due_at, month_only=memory.due_month_only, zone=zone)}")
    if memory.raised_on is not None:
        parts.append(f"emailed about {day_said(memory.raised_on, today=today)}")
    if bring_up or memory.due_at is None:
        # An undated intention comes up at the next chance.
        parts.append("raise it now")
    return f" ({'; '.join(parts)})"
