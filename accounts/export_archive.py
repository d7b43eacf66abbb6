"""The export as one download: a zip holding the complete JSON, documented section by
section, and beside it a page of the same data that a person reads in any browser, offline.

The page is drawn from the JSON's own data, not from the database again, so the two cannot
disagree; it leaves out only what means nothing to a person (row ids, keys, hashes)."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.template.loader import render_to_string

from accounts.export import SECTIONS, account_export
from accounts.models import User

JSON_NAME = "your-data.json"
PAGE_NAME = "your-data.html"
README_NAME = "README.txt"
# Who said a message, as the page says it.
SPEAKERS = {"user": "You", "assistant": "Your coach"}


def account_export_files(*, user: User, now: datetime) -> dict[str, str]:
    """Each file of the download by name: the JSON, the page of it, and what each one is."""
    data = account_export(user=user, now=now)
    return {
        README_NAME: _readme(now),
        PAGE_NAME: render_to_string("accounts/export_page.html", _page(data)),
        JSON_NAME: json.dumps(data, ensure_ascii=False, indent=2),
    }


def account_export_zip(*, user: User, now: datetime) -> bytes:
    """The download itself: the files in one folder named for the day, so that unpacking
    two exports never mixes them."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, text in account_export_files(user=user, now=now).items():
            archive.writestr(f"{export_name(now)}/{name}", text)
    return buffer.getvalue()


def export_name(now: datetime) -> str:
    return f"coach-export-{now:%Y-%m-%d}"


def _readme(now: datetime) -> str:
    sections = "\n".join(f"- {name}: {about}" for name, about in SECTIONS.items())
    return (
        f"Everything {settings.SITE_NAME} held about you on {now:%d %B %Y}.\n\n"
        f"{PAGE_NAME}: open it in any browser to read it (it works offline).\n"
        f"{JSON_NAME}: the same data, complete, for another program to read. Its sections:\n"
        f"{sections}\n"
    )


def _page(data: dict[str, Any]) -> dict[str, Any]:
    zone = _zone(data["profile"].get("time_zone"))
    conversations = [
        {
            **session,
            "started": _when(session["created_at"], zone),
            "messages": [
                {**m, "speaker": SPEAKERS.get(m["role"], m["role"]), "when": _when(m["created_at"], zone)}
                for m in session["messages"]
            ],
        }
        for session in data["chat_sessions"]
    ]
    memories = [
        {
            **memory,
            "saved": _when(memory["created_at"], zone),
            "due": _when(memory["due_at"], zone),
            "history": [{**event, "when": _when(event["created_at"], zone)} for event in memory["history"]],
        }
        for memory in data["memories"]
    ]
    emails = [{**email, "when": _when(email["sent_at"], zone)} for email in data["emails"]]
    readings = [{**reading, "when": _when(reading["viewed_at"], zone)} for reading in data["staff_readings"]]
    return {
        "site_name": settings.SITE_NAME,
        "exported": _when(data["exported_at"], zone),
        "about": SECTIONS,
        "profile": data["profile"],
        "joined": _when(data["profile"].get("date_joined"), zone),
        "email_addresses": data["email_addresses"],
        "preferences": data["email_preferences"],
        "memories": memories,
        "forgotten": data["history_of_memories_no_longer_kept"],
        "proposals": data["proposals"],
        "conversations": conversations,
        "emails": emails,
        "readings": readings,
        "json_name": JSON_NAME,
    }


def _zone(name: str | None) -> ZoneInfo:
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def _when(iso: str | None, zone: ZoneInfo) -> str:
    """An exported time as the person reads it on their own clock: "3 December 2026, 14:05"."""
    if not iso:
        return ""
    moment = datetime.fromisoformat(iso)
    if moment.tzinfo is None:
        return f"{moment:%-d %B %Y}"
    return f"{moment.astimezone(zone):%-d %B %Y, %H:%M}"
