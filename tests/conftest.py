"""Fixtures shared by every app's tests."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from django.core.cache import cache
from playwright.sync_api import Page, Playwright, sync_playwright

from accounts.models import User
from infra import llm
from offline_coach import ModelServer
from tests.chromium import CHROMIUM_ARGS, CHROMIUM_PATH
from tests.emails.smtp_sink import SmtpSink

if TYPE_CHECKING:
    from celery.worker import WorkController

PASSWORD = "correct horse battery staple"


BROWSER_FIXTURES = frozenset({"page", "context", "browser", "new_context", "playwright"})


def pytest_configure(config: pytest.Config) -> None:
    """Each run's temporary folders under a folder of its own, made for it, unless one is given.

    The PostgreSQL a test starts runs as another user when the tests run as root, so the
    folders above its data must let that user through; pytest makes its shared folder
    (pytest-of-USER) its owner's alone again whenever any run starts, so a second suite
    on the same machine would lock out the first one's servers mid-run. xdist's workers
    are given the run's folder by the controller."""
    if config.option.basetemp is None and not os.environ.get("PYTEST_XDIST_WORKER"):
        config.option.basetemp = tempfile.mkdtemp(prefix="coach-tests-")
        config.add_cleanup(lambda: shutil.rmtree(config.option.basetemp, ignore_errors=True))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The browser tests run last. Playwright's sync API keeps an event loop running in the
    test thread from its start to the session's end, and Django rightly refuses sync
    database calls where a loop runs; so everything before it runs with that guard on."""
    items.sort(key=lambda item: bool(BROWSER_FIXTURES & set(getattr(item, "fixturenames", ()))))


@pytest.fixture(scope="session")
def playwright() -> Iterator[Playwright]:
    """Playwright for the browser tests, which read the database from the thread its loop
    runs in: only from here on is Django's guard lifted."""
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as started:
            yield started
    finally:
        del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]


@pytest.fixture(autouse=True)
def _turns_end_with_their_test() -> Iterator[None]:
    """A turn a test started in the background ends before the next test begins, so it
    cannot take that test's scripted answers or write into its database."""
    yield
    from coach.runner import wait_for_running

    assert wait_for_running(timeout=30), "a turn started by this test was still running 30 s after it"


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    # Rate-limit counters, reply streams and open readers live in Redis and would
    # otherwise carry over between tests.
    cache.clear()
    from infra.redis import redis_sync

    client = redis_sync()
    stale = list(client.scan_iter("coach:*", count=1000))
    if stale:
        client.delete(*stale)
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
    # What the gateway learned of a server lives as long as the process: each test starts
    # from nothing.
    llm.forget_fallbacks()
    settings.OPENAI_BASE_URL = _model_server.base_url
    settings.OPENAI_API_KEY = "test-key"
    settings.COACH_MODEL = "offline-coach"
    # The bag of words, for exact control: texts are alike when they share their words, so a
    # test decides what the dedup check sees. Tests about meaning ask for all-MiniLM-L6-v2.
    settings.EMBEDDING_MODEL = "bag-of-words"
    settings.MEMORY_DEDUP_THRESHOLD = 0.8
    settings.MEMORY_DEDUP_FAR_THRESHOLD = 0.95
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
    from coach.wiring.celery import app

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

    from coach.wiring.celery import app

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
        "args": list(CHROMIUM_ARGS),
    }


@pytest.fixture
def page(page: Page) -> Iterator[Page]:
    """pytest-playwright's page, and, once the test is done, axe-core on the state it left
    the page in: every browser test is also an accessibility check of where it ended."""
    yield page
    if page.is_closed() or not page.url.startswith(("http://127.0.0.1", "http://localhost")):
        return
    from tests.accessibility import assert_accessible

    assert_accessible(page, "the page this test ended on")
