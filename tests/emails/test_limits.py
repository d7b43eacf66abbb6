"""The limits a send lives by stay in order, as production reads them from the environment:
the stale-claim limit (the last resort, after the heartbeats) above the longest send,
drafting and then the SMTP exchange RFC 5321's waits allow; the broker's visibility
timeout above that limit; a prefetch of one. Settings that break the order stop start-up,
saying why."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.processes import PRODUCTION, REPO

READ_LIMITS = (
    "import django; django.setup(); from django.conf import settings as s; "
    "print(s.EMAIL_SMTP_LONGEST_SECONDS, s.EMAIL_CLAIM_STALE_SECONDS, s.CELERY_VISIBILITY_TIMEOUT_SECONDS, "
    "s.CELERY_BROKER_TRANSPORT_OPTIONS['visibility_timeout'], s.CELERY_WORKER_PREFETCH_MULTIPLIER)"
)


def production(args: list[str], **variables: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DJANGO_", "FIELD_"))}
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, env=env | PRODUCTION | variables, capture_output=True, text=True, timeout=60
    )


def test_by_default_a_stale_claim_and_the_visibility_timeout_outlast_the_longest_send() -> None:
    result = production(["-c", READ_LIMITS])

    assert result.returncode == 0, result.stderr
    # Seven 5-minute replies, DATA's 2, a 3-minute block, 10 for the end, 5 s of QUIT;
    # drafting is four model calls of 30 s, each tried three times: 360 s, and a minute.
    assert result.stdout.split() == ["3005.0", "3425", "3725", "3725", "1"]


def test_longer_smtp_waits_lengthen_the_limits_that_follow_from_them() -> None:
    result = production(["-c", READ_LIMITS], EMAIL_SMTP_END_OF_DATA_TIMEOUT_SECONDS="1200")

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["3605.0", "4025", "4325", "4325", "1"]


def test_a_stale_limit_a_slow_send_could_outlast_stops_start_up() -> None:
    result = production(["manage.py", "check"], EMAIL_CLAIM_STALE_SECONDS="600")

    assert result.returncode != 0
    assert "EMAIL_CLAIM_STALE_SECONDS must be above the longest drafting and SMTP exchange" in result.stderr
    assert "(3365 s)" in result.stderr


def test_a_visibility_timeout_a_running_send_could_outlast_stops_start_up() -> None:
    result = production(["manage.py", "check"], CELERY_VISIBILITY_TIMEOUT_SECONDS="3400")

    assert result.returncode != 0
    assert "CELERY_VISIBILITY_TIMEOUT_SECONDS must be above EMAIL_CLAIM_STALE_SECONDS" in result.stderr
