"""Settings for a Celery worker that a test runs as a process of its own (and may kill).

The test settings, plus what only the test process knows: its test database's name and
its SMTP sink's port. The visibility timeout is seconds, not an hour, so a task whose
worker was killed comes back while the test waits; the stale-claim limit stays below it,
as in production.
"""

import os

from tests.settings import *  # noqa: F403
from tests.settings import DATABASES

DATABASES["default"]["NAME"] = os.environ["COACH_TEST_DATABASE_NAME"]
MAILERS = {
    "default": {
        "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "OPTIONS": {"host": "127.0.0.1", "port": int(os.environ["COACH_TEST_SMTP_PORT"]), "timeout": 10},
    }
}
CELERY_VISIBILITY_TIMEOUT_SECONDS = 3
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": CELERY_VISIBILITY_TIMEOUT_SECONDS,
    # Look for abandoned tasks every second rather than every hundred.
    "unacked_restore_interval": 1,
    "unacked_restore_throttle": 1,
}
EMAIL_CLAIM_STALE_SECONDS = 2
