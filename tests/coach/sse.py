"""Reading the chat's streams over real HTTP, as a browser's EventSource would, and posting
its forms as a browser does, to any web process."""

from __future__ import annotations

import json
import secrets
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from urllib.parse import urlencode

from django.test import Client

# Any token the cookie and the header agree on passes Django's CSRF check.
CSRF_TOKEN = secrets.token_hex(16)


@dataclass(frozen=True)
class Event:
    id: str | None
    name: str
    data: dict


def session_cookie(client: Client) -> str:
    return f"sessionid={client.cookies['sessionid'].value}"


def read_events(
    url: str,
    *,
    cookie: str,
    timeout: float = 30,
    last_event_id: str | None = None,
    on_open: Callable[[], object] | None = None,
) -> Iterator[Event]:
    """Each event as it arrives, until the server ends the stream; `on_open` is called once
    the server has answered with the stream's headers (it reads from then on)."""
    headers = {"Cookie": cookie, "Accept": "text/event-stream"}
    if last_event_id:
        headers["Last-Event-ID"] = last_event_id
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=timeout) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        if on_open is not None:
            on_open()
        event_id, name, data = None, "message", ""
        for raw in response:
            line = raw.decode().rstrip("\n")
            if line.startswith("id: "):
                event_id = line[len("id: ") :]
            elif line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                data += line[len("data: ") :]
            elif line == "" and data:
                yield Event(event_id, name, json.loads(data))
                event_id, name, data = None, "message", ""


def events(url: str, *, cookie: str, timeout: float = 30) -> Iterator[tuple[str, dict]]:
    """(event name, data) pairs as they arrive, until the stream ends."""
    for event in read_events(url, cookie=cookie, timeout=timeout):
        yield event.name, event.data


def post_form(
    url: str, form: dict[str, str], *, cookie: str, htmx: bool = True, headers: dict[str, str] | None = None
) -> tuple[int, str]:
    """POST a form as the page does; (status, body). Redirects are not followed."""
    headers = {
        **(headers or {}),
        "Cookie": f"{cookie}; csrftoken={CSRF_TOKEN}",
        "X-CSRFToken": CSRF_TOKEN,
        "Content-Type": "application/x-www-form-urlencoded",
    }
    if htmx:
        headers["HX-Request"] = "true"
    request = urllib.request.Request(url, data=urlencode(form).encode(), headers=headers, method="POST")
    opener = urllib.request.build_opener(_NoRedirects)
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None
