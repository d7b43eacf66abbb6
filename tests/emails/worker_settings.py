"""Settings for a Celery worker that a test runs as a process of its own (and may kill).

The test settings, plus what only the test process knows: its test database's name and
its SMTP server's port. SMTP's waits are seconds, not minutes. The broker's visibility
timeout and the stale-claim limit stay production's (about an hour each), and no beat
runs the dispatcher: an email that goes out within the test's minutes after a worker's
restart was released by that restart, not handed out again by Redis or the dispatcher.
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
EMAIL_SMTP_COMMAND_TIMEOUT_SECONDS = 10.0
EMAIL_SMTP_DATA_TIMEOUT_SECONDS = 10.0
EMAIL_SMTP_BLOCK_TIMEOUT_SECONDS = 10.0
EMAIL_SMTP_END_OF_DATA_TIMEOUT_SECONDS = 60.0
