"""Settings for a Celery worker or beat that a test runs as a process of its own (and may
kill).

The test settings, plus what only the test process knows: its test database's name and
its SMTP server's port. SMTP's waits are seconds, not minutes. The claims' heartbeat and
its silence stay production's (2 s, 10 s), and so do the broker's visibility timeout and
the stale-claim limit (about an hour each): an email that goes out within the test's
minute after its worker died was handed on because its holder's process was gone or its
heartbeat stopped, not because Redis or the last resort let it go.
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
