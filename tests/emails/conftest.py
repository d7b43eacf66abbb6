"""What the tests against real worker and beat processes share: the SMTP server they send
to, and what those processes are started with."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from coach.wiring.celery import app
from offline_coach import ModelServer
from tests.emails.scripted_smtp import ScriptedSmtpServer
from tests.emails.workers import forget_unacknowledged


@pytest.fixture
def workers_smtp() -> Iterator[ScriptedSmtpServer]:
    """The tests' own SMTP server, for workers of their own; the broker's queue starts
    empty, and what killed workers left unacknowledged is forgotten after."""
    app.control.purge()
    started = ScriptedSmtpServer().start()
    yield started
    started.stop()
    forget_unacknowledged()


@pytest.fixture
def processes(workers_smtp: ScriptedSmtpServer, model_server: ModelServer) -> dict[str, object]:
    """What a test's worker and beat processes are started with: its SMTP and model servers."""
    return {"smtp_port": workers_smtp.port, "model_url": model_server.base_url}
