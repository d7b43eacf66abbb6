"""What goes over the wire compressed, and what does not.

Static files are compressed once, when collected (gzip and brotli), and served as the
smallest copy the browser accepts. Pages are gzipped as they are served, BREACH-aware: a
random-length gzip header and a CSRF token masked afresh in every response. A reply's
server-sent events are never compressed: its words reach the browser as they are written.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path

import brotli
import pytest
from django.test import Client

from accounts.models import User
from coach.models import Message
from coach.services import session_start
from offline_coach import ModelServer, Pause
from tests.coach.sse import post_form, session_cookie
from tests.processes import PRODUCTION, REPO, uvicorn_app

BROWSER_ENCODINGS = "gzip, deflate, br, zstd"
LONG_REPLY = " ".join(f"word{n}" for n in range(60))
FNAME = 0x08  # the gzip header flag for "a file name follows"


def get(url: str, *, encodings: str | None = BROWSER_ENCODINGS, **headers: str):
    """(status, headers, raw body bytes as they came over the wire)."""
    if encodings is not None:
        headers["Accept-Encoding"] = encodings
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=15) as response:
        return response.status, response.headers, response.read()


# Pages ---------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_pages_are_gzipped_for_browsers_that_accept_it(live_app: str) -> None:
    status, headers, body = get(live_app + "/")

    assert status == 200
    assert headers["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in headers["Vary"]
    page = gzip.decompress(body).decode()
    assert "<h1" in page and "A coach that remembers you" in page
    assert len(body) < len(page.encode()) / 2


@pytest.mark.django_db(transaction=True)
def test_a_client_that_asks_for_no_compression_gets_the_page_as_it_is(live_app: str) -> None:
    status, headers, body = get(live_app + "/", encodings=None)

    assert status == 200 and headers["Content-Encoding"] is None
    assert b"A coach that remembers you" in body


@pytest.mark.django_db(transaction=True)
def test_compressed_pages_carry_the_breach_mitigations(live_app: str) -> None:
    _, first_headers, first = get(live_app + "/")
    cookie = re.search(r"csrftoken=[^;]+", first_headers["Set-Cookie"]).group(0)
    _, _, second = get(live_app + "/", Cookie=cookie)

    # Heal the Breach: each gzip header carries a file name of random length, so a
    # response's length does not tell what its compression matched.
    assert first[3] & FNAME and second[3] & FNAME
    tokens = [
        json.loads(re.search(r"hx-headers='([^']+)'", gzip.decompress(body).decode()).group(1))["X-CSRFToken"]
        for body in (first, second)
    ]
    # The same CSRF secret (one cookie), masked differently in each response: no secret
    # repeats from one response to the next for an attacker to match against.
    assert tokens[0] != tokens[1]


# Server-sent events --------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_reply_stream_is_not_compressed_and_its_words_arrive_as_they_are_written(
    live_app: str, user: User, client: Client, model_server: ModelServer
) -> None:
    client.force_login(user)
    cookie = session_cookie(client)
    # Held after word3 until the reader has those words: a stream buffered on its way (as
    # compression would) could not deliver them while the rest is not yet written.
    writing = Pause(after_chunks=5)
    model_server.queue_text(LONG_REPLY, chunk_delay_seconds=0.05, pause=writing)
    session = session_start(user=user)
    status, body = post_form(
        f"{live_app}/chat/{session.pk}/messages",
        {"text": "Plan my week", "client_id": str(uuid.uuid4())},
        cookie=cookie,
    )
    assert status == 200, body
    message = Message.objects.filter(session=session, role="user").latest("pk")

    request = urllib.request.Request(
        f"{live_app}/chat/{session.pk}/messages/{message.pk}/reply",
        headers={"Cookie": cookie, "Accept": "text/event-stream", "Accept-Encoding": BROWSER_ENCODINGS},
    )
    words: list[str] = []
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        assert response.headers["Content-Encoding"] is None
        for raw in response:
            line = raw.decode()  # plain UTF-8 text as sent: a compressed byte would not decode
            if line.startswith("data: ") and (text := json.loads(line[len("data: ") :]).get("text")):
                words.append(text)
            if "word3" in "".join(words):
                writing.release.set()

    assert "".join(words) == LONG_REPLY
    assert len(words) >= 20, "the reply came in a few lumps, not word by word"


# Static files in production ------------------------------------------------------------


def test_production_serves_static_files_precompressed_with_brotli_and_gzip_and_gzips_pages(tmp_path: Path) -> None:
    static_root = tmp_path / "static"
    env = {**PRODUCTION, "SECURE_SSL_REDIRECT": "false", "STATIC_ROOT": str(static_root)}
    collected = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
        cwd=REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert collected.returncode == 0, collected.stderr
    source = (REPO / "static" / "css" / "landing.css").read_bytes()
    hashed = next((static_root / "css").glob("landing.*.css"))
    assert brotli.decompress(hashed.with_name(hashed.name + ".br").read_bytes()) == source
    assert gzip.decompress(hashed.with_name(hashed.name + ".gz").read_bytes()) == source
    assert list((static_root / "css").glob("app.*.css.br"))

    with uvicorn_app(env) as base:
        url = f"{base}/static/css/{hashed.name}"
        _, as_brotli, brotli_body = get(url)
        _, as_gzip, gzip_body = get(url, encodings="gzip")
        _, plain, plain_body = get(url, encodings=None)
        _, page_headers, page = get(base + "/", Host="coach.example.com")

    assert as_brotli["Content-Encoding"] == "br" and brotli.decompress(brotli_body) == source
    assert as_gzip["Content-Encoding"] == "gzip" and gzip.decompress(gzip_body) == source
    assert plain["Content-Encoding"] is None and plain_body == source
    assert "Accept-Encoding" in as_brotli["Vary"]
    assert page_headers["Content-Encoding"] == "gzip"
    assert b"A coach that remembers you" in gzip.decompress(page)
