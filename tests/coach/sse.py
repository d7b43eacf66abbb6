"""Reading a reply stream over real HTTP, as a browser's EventSource would."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator

from django.test import Client


def session_cookie(client: Client) -> str:
    return f"sessionid={client.cookies['sessionid'].value}"


def events(url: str, *, cookie: str, timeout: float = 30) -> Iterator[tuple[str, dict]]:
    """(event name, data) pairs as they arrive, until the stream ends."""
    request = urllib.request.Request(url, headers={"Cookie": cookie, "Accept": "text/event-stream"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        name, data = "message", ""
        for raw in response:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                data += line[len("data: ") :]
            elif line == "" and data:
                yield name, json.loads(data)
                name, data = "message", ""
