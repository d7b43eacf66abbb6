"""Test settings: the real settings, with only what tests need changed.

The services are real (the test command starts PostgreSQL and Redis and exports their
URLs); secrets are made fresh for each run; passwords hash fast.
"""

import os
import secrets

from cryptography.fernet import Fernet

if not os.environ.get("DATABASE_URL") or not os.environ.get("REDIS_URL"):
    raise SystemExit("The tests need DATABASE_URL and REDIS_URL: run them with bin/test, which starts both.")
# Run in parallel (pytest-xdist), each worker has a database of its own (pytest-django
# names it) and Redis databases of its own: its streams, rate limits and Celery queues are
# never another worker's, and the processes a test starts inherit them.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if WORKER.startswith("gw"):
    os.environ["REDIS_URL"] = os.environ["REDIS_URL"].rsplit("/", 1)[0] + f"/{2 + 2 * int(WORKER[2:])}"
os.environ.setdefault("DJANGO_DEBUG", "true")
os.environ.setdefault("DJANGO_SECRET_KEY", secrets.token_urlsafe(50))
os.environ.setdefault("FIELD_ENCRYPTION_KEYS", Fernet.generate_key().decode())
os.environ.setdefault("FIELD_LOOKUP_KEY", secrets.token_urlsafe(48))

from coach.wiring.settings import *  # noqa: E402, F403 (its environment is set above)
from coach.wiring.settings import CACHES, REDIS_URL  # noqa: E402

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# The cache (rate-limit counters) on its own Redis database, the one after the app's, so
# clearing it between tests leaves Celery's queues alone.
_REDIS_SERVER, _REDIS_DATABASE = REDIS_URL.rsplit("/", 1)
CACHES = {"default": {**CACHES["default"], "LOCATION": f"{_REDIS_SERVER}/{int(_REDIS_DATABASE) + 1}"}}

# Playwright's sync API keeps an event loop running in the test thread, where Django's
# test client cannot call an async-only middleware. Static files are served to the
# browser tests by ASGIStaticFilesHandler, and to uvicorn in tests/coach/test_static.py.
MIDDLEWARE = [name for name in MIDDLEWARE if name != "servestatic.middleware.ServeStaticMiddleware"]  # noqa: F405
