"""What any client can send, and what the app keeps from caches: a body past the limit is
refused from its headers, a forged X-Forwarded-For changes nothing, and no page with
someone's data may be stored."""

from __future__ import annotations

import http.client
import json
import re
import socket
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.test import Client

from accounts.models import User
from coach.wiring.web_server import web_server_argv
from tests.accounts.staff import signed_in_just_now
from tests.coach.factories import make_session
from tests.memory.factories import make_memory
from tests.processes import REPO, app_process

SIXTY_MB = 60 * 1024 * 1024


def shipped_uvicorn_args() -> list[str]:
    """The uvicorn command line the Dockerfile's web command runs (coach/wiring/web_server.py)."""
    line = next(line for line in (REPO / "Dockerfile").read_text().splitlines() if line.startswith("CMD "))
    command = json.loads(line.removeprefix("CMD "))
    assert command[:3] == ["python", "-m", "coach.wiring.web_server"]
    argv = web_server_argv(*command[3:])
    return argv[argv.index("uvicorn") :]


def test_a_60_mb_body_is_refused_from_its_headers_and_never_written(tmp_path: Path) -> None:
    spool = tmp_path / "tmp"
    spool.mkdir()
    with app_process({"TMPDIR": str(spool)}, uvicorn_args=shipped_uvicorn_args()) as app:
        port = int(app.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
            # The headers only: an answer now is an answer that never waited for the body.
            connection.sendall(
                b"POST /chat/new HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/x-www-form-urlencoded\r\n" + f"Content-Length: {SIXTY_MB}\r\n\r\n".encode()
            )
            # Headers and body may come in separate packets: read until the server closes.
            received = b""
            while chunk := connection.recv(65536):
                received += chunk
            answer = received.decode()

    assert answer.startswith("HTTP/1.1 413")
    assert "That is too much to send at once" in answer
    assert list(spool.iterdir()) == []


def test_a_chunked_body_past_the_limit_is_answered_413_with_words_not_a_bare_error() -> None:
    with app_process({}, uvicorn_args=shipped_uvicorn_args()) as app:
        port = int(app.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
            connection.sendall(
                b"POST /chat/new HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            chunk = b"x" * 65536
            try:
                for _ in range(16):  # a megabyte, twice the limit, without a length
                    connection.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                connection.sendall(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass  # answered, and closed, before the rest was sent
            received = b""
            try:
                while data := connection.recv(65536):
                    received += data
            except ConnectionResetError:
                pass
            answer = received.decode()

    assert answer.startswith("HTTP/1.1 413"), answer[:200]
    assert "That is too much to send at once" in answer


def test_a_forged_forwarded_for_does_not_escape_the_sign_in_limit(transactional_db: None) -> None:
    from offline_coach import ModelServer
    from tests.coach.test_resumable_turn import app_env

    with ModelServer() as model, app_process(app_env(model), uvicorn_args=shipped_uvicorn_args()) as app:
        port = int(app.url.rsplit(":", 1)[1])
        refused = []
        for number in range(11):
            # From 127.0.0.2: a client, not the trusted proxy (127.0.0.1), claiming to be many.
            forged = {"X-Forwarded-For": f"203.0.113.{number}"}
            body = sign_in_from("127.0.0.2", port, f"guess{number}@example.com", headers=forged)
            refused.append("Too many failed login attempts" in body)

    assert refused == [False] * 10 + [True]


def sign_in_from(source: str, port: int, email: str, *, headers: dict[str, str]) -> str:
    token = "t" * 32
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=(source, 0))
    try:
        connection.request(
            "POST",
            "/accounts/login/",
            body=urlencode({"login": email, "password": "wrong"}),
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Cookie": f"csrftoken={token}",
                "X-CSRFToken": token,
                **headers,
            },
        )
        return connection.getresponse().read().decode()
    finally:
        connection.close()


@pytest.mark.django_db
def test_every_page_a_signed_in_person_sees_says_no_store(user: User) -> None:
    session = make_session(user, "Hello", "Hi!")
    memory = make_memory(user, "breakfast", summary="Oats", content="Oats daily")
    message = session.messages.filter(role="user").first()
    client = signed_in_just_now(Client(), user)
    pages = [
        "/",
        "/chat/new",
        f"/chat/{session.pk}/",
        f"/chat/{session.pk}/messages/{message.pk}/",
        "/memories/",
        "/memories/context",
        "/memories/forgotten/",
        f"/memories/{memory.pk}/",
        f"/memories/{memory.pk}/history",
        f"/memories/{memory.pk}/edit",
        f"/memories/{memory.pk}/delete",
        "/account/",
        "/account/export",
        "/account/delete",
        "/account/delete-memories",
        "/accounts/email/",
        "/accounts/password/change/",
        "/accounts/2fa/",
    ]

    for page in pages:
        response = client.get(page)
        assert response.status_code in (200, 302), page
        assert re.search(r"\bno-store\b", response["Cache-Control"]), page
        assert "private" in response["Cache-Control"], page
