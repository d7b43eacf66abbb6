"""Fixtures shared by every app's tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from django.core.cache import cache

from accounts.models import User
from offline_coach import ModelServer
from tests.emails.smtp_sink import SmtpSink

if TYPE_CHECKING:
    from celery.worker import WorkController

# Playwright's sync API runs an event loop in the test thread; Django's live server is
# safe to use from it.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM_PATH = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
PASSWORD = "correct horse battery staple"


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    # Rate-limit counters live in Redis and would otherwise carry over between tests.
    cache.clear()
    yield


@pytest.fixture(scope="session")
def _model_server() -> Iterator[ModelServer]:
    server = ModelServer(scripted=True)
    server.start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def model_server(_model_server: ModelServer, settings) -> ModelServer:
    """The scripted model server, over real HTTP, for every test: none reaches the internet.

    A test queues what the model answers and reads back every request the app sent."""
    _model_server.reset()
    settings.OPENAI_BASE_URL = _model_server.base_url
    settings.OPENAI_API_KEY = "test-key"
    settings.COACH_MODEL = "offline-coach"
    # The bag of words, for exact control: texts are alike when they share their words, so a
    # test decides what the dedup check sees. Tests about meaning ask for all-MiniLM-L6-v2.
    settings.EMBEDDING_MODEL = "bag-of-words"
    settings.MEMORY_DEDUP_THRESHOLD = 0.8
    settings.LLM_MAX_RETRIES = 0
    settings.LLM_TIMEOUT_SECONDS = 5.0
    return _model_server


@pytest.fixture
def live_app(transactional_db: None) -> Iterator[str]:
    """The base URL of the app served over ASGI by uvicorn, for browser tests."""
    from tests.asgi_server import asgi_app_server

    with asgi_app_server() as url:
        yield url


@pytest.fixture
def celery_eager() -> Iterator[None]:
    """Tasks run in the test's own thread when enqueued (for tests about what a task does;
    the tests about delivery run a real worker against Redis instead)."""
    from coach.celery import app

    app.conf.task_always_eager = True
    app.conf.task_eager_propagates = True
    yield
    app.conf.task_always_eager = False
    app.conf.task_eager_propagates = False


@pytest.fixture
def smtp_sink(settings) -> Iterator[SmtpSink]:
    """A real SMTP server (aiosmtpd) on a free port, with Django's mail sent to it.

    The test runner swaps every mailer for locmem; this puts the real SMTP backend back,
    pointed at the sink, for the tests about what actually goes over the wire."""
    sink = SmtpSink().start()
    settings.MAILERS = {"default": sink.mailer}
    yield sink
    sink.stop()


@pytest.fixture
def celery_worker(transactional_db: None) -> Iterator[WorkController]:
    """A real Celery worker, in this process, consuming the test Redis with two threads
    (so two deliveries of one task can run at once). It reads the database through its
    own connections, hence transactional_db: what a test writes must be committed."""
    from celery.contrib.testing.worker import start_worker

    from coach.celery import app

    # Whatever an earlier test left in the queue is not this test's business.
    app.control.purge()
    with start_worker(app, pool="threads", concurrency=2, perform_ping_check=False, shutdown_timeout=30) as worker:
        yield worker


@pytest.fixture
def user(db: None) -> User:
    return make_user("ada@example.com")


@pytest.fixture
def other_user(db: None) -> User:
    return make_user("grace@example.com")


def make_user(email: str, *, verified: bool = True, onboarded: bool = True) -> User:
    from allauth.account.models import EmailAddress
    from django.utils import timezone

    user = User.objects.create_user(email, PASSWORD, onboarded_at=timezone.now() if onboarded else None)
    EmailAddress.objects.create(user=user, email=email, primary=True, verified=verified)
    return user


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict) -> dict:
    """Debian's Chromium: Playwright's own browser download cannot work here."""
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM_PATH,
        "args": [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            # Without these Chromium keeps dialling out to a network it cannot reach.
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ],
    }
