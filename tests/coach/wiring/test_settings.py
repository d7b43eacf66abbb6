"""Production settings: secrets are required, and Django's deployment checks pass."""

from __future__ import annotations

import asyncio
import base64
import os
import secrets
import subprocess
import sys
import uuid

import pytest
from cryptography.fernet import Fernet

from accounts.models import User
from infra.environment import looks_random
from tests.processes import PRODUCTION, REPO

# A valid Fernet key anyone can guess: thirty-two zero bytes.
ZERO_KEY = base64.urlsafe_b64encode(bytes(32)).decode()


def run_django(args: list[str], **overrides: str | None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DJANGO_", "FIELD_"))}
    env |= PRODUCTION
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return subprocess.run([sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)


def test_production_settings_pass_the_deployment_checks() -> None:
    result = run_django(["manage.py", "check", "--deploy", "--fail-level", "WARNING"])

    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


@pytest.mark.parametrize("secret", ["DJANGO_SECRET_KEY", "FIELD_ENCRYPTION_KEYS", "FIELD_LOOKUP_KEY"])
def test_production_refuses_to_start_without_a_secret(secret: str) -> None:
    result = run_django(["manage.py", "check"], **{secret: None})

    assert result.returncode != 0
    assert f"{secret} is not set" in result.stderr


# A key as Fernet.generate_key() makes one, written out: the test's cases must be the same in
# every pytest-xdist worker.
A_RANDOM_KEY = "hdE8UZpWK7Xkk2Idlj8Upt-jEbKdmp5AGEW8FqztcBg="


@pytest.mark.parametrize(
    ("secret", "value", "said"),
    [
        ("FIELD_ENCRYPTION_KEYS", "collectstatic", "FIELD_ENCRYPTION_KEYS holds something that is not a Fernet key"),
        ("FIELD_LOOKUP_KEY", "x", "FIELD_LOOKUP_KEY is too short: it must be at least 32 random bytes"),
        ("DJANGO_SECRET_KEY", "short-secret", "DJANGO_SECRET_KEY is too short: it must be at least 32 random bytes"),
        ("DJANGO_SECRET_KEY", "a" * 50, "DJANGO_SECRET_KEY does not look random"),
        ("FIELD_LOOKUP_KEY", "x" * 32, "FIELD_LOOKUP_KEY does not look random"),
        ("FIELD_LOOKUP_KEY", "0123456789abcdef" * 3, "FIELD_LOOKUP_KEY does not look random"),
        ("FIELD_ENCRYPTION_KEYS", ZERO_KEY, "FIELD_ENCRYPTION_KEYS: key 1 of 1 does not look random"),
        (
            "FIELD_ENCRYPTION_KEYS",
            f"{A_RANDOM_KEY},{ZERO_KEY}",
            "FIELD_ENCRYPTION_KEYS: key 2 of 2 does not look random",
        ),
    ],
)
def test_production_refuses_to_start_with_a_secret_that_is_not_one(secret: str, value: str, said: str) -> None:
    result = run_django(["manage.py", "check", "--deploy"], **{secret: value})

    assert result.returncode != 0
    assert said in result.stderr
    assert "Traceback" not in result.stderr.splitlines()[-1]


@pytest.mark.parametrize(
    "make",
    [
        lambda: secrets.token_urlsafe(50),
        lambda: secrets.token_urlsafe(32),
        lambda: secrets.token_hex(16),
        lambda: uuid.uuid4().hex,
        lambda: base64.urlsafe_b64decode(Fernet.generate_key()),
    ],
    ids=["token_urlsafe(50)", "token_urlsafe(32)", "token_hex(16)", "uuid4().hex", "a Fernet key's bytes"],
)
def test_secrets_made_the_ways_the_messages_say_always_look_random(make) -> None:
    assert all(looks_random(make()) for _ in range(20_000))


@pytest.mark.parametrize("variable", ["ALLOWED_HOSTS", "SITE_URL", "EMAIL_HOST", "EMAIL_USE_TLS"])
def test_production_refuses_to_start_without_what_it_cannot_guess(variable: str) -> None:
    result = run_django(["manage.py", "check"], **{variable: None})

    assert result.returncode != 0
    assert f"{variable} is not set" in result.stderr


def test_a_database_url_that_is_not_postgresql_is_refused_by_name() -> None:
    result = run_django(["manage.py", "check"], DATABASE_URL="sqlite:///db.sqlite3")

    assert result.returncode != 0
    assert "DATABASE_URL must point at PostgreSQL" in result.stderr


def test_a_pool_asked_to_keep_more_connections_than_it_may_open_is_refused_by_name() -> None:
    result = run_django(["manage.py", "check"], DATABASE_POOL_MIN_SIZE="30", DATABASE_POOL_MAX_SIZE="20")

    assert result.returncode != 0
    assert "DATABASE_POOL_MIN_SIZE must be between 0 and DATABASE_POOL_MAX_SIZE" in result.stderr


def test_development_sends_mail_to_the_console_without_an_smtp_host() -> None:
    result = run_django(
        ["-c", "import django; django.setup(); from django.conf import settings; print(settings.MAILERS)"],
        DJANGO_DEBUG="true",
        EMAIL_HOST=None,
    )

    assert result.returncode == 0, result.stderr
    assert "infra.console_mail.ReadableConsoleBackend" in result.stdout


def test_development_mail_prints_links_whole(capsys) -> None:
    from django.core.mail import EmailMessage

    from infra.console_mail import ReadableConsoleBackend

    link = "http://127.0.0.1:8000/accounts/confirm-email/" + "k" * 120 + "/"
    ReadableConsoleBackend(alias="default").send_messages(
        [EmailMessage("Confirm", f"To confirm, go to {link}", "coach@localhost", ["ada@example.com"])]
    )

    printed = capsys.readouterr().out
    assert link in printed
    assert "Subject: Confirm" in printed and "To: ada@example.com" in printed


def test_development_mail_stands_out_in_the_console_with_its_links_alone_on_their_lines(capsys) -> None:
    from django.core.mail import EmailMessage

    from infra.console_mail import ReadableConsoleBackend

    link = "http://127.0.0.1:8000/accounts/confirm-email/MQ:abc/"
    body = f"Hello,\n\nTo confirm your address, go to {link}.\nThanks (see {link})"
    ReadableConsoleBackend(alias="default").send_messages(
        [EmailMessage("Confirm your email address", body, "coach@localhost", ["ada@example.com"])]
    )

    lines = capsys.readouterr().out.splitlines()
    assert "MAIL to ada@example.com: Confirm your email address" in lines
    listed = lines[lines.index("Links in this mail:") + 1 :]
    assert listed[0] == f"  {link}" and listed[1].startswith("====")


def test_a_sync_database_call_from_async_code_fails_the_test(db: None) -> None:
    """The suite runs with Django's guard on (only the browser tests, last, lift it), so
    async code that forgets db_step fails here rather than blocking a server's loop."""
    from django.core.exceptions import SynchronousOnlyOperation

    async def forgetful() -> int:
        return User.objects.count()

    with pytest.raises(SynchronousOnlyOperation):
        asyncio.run(forgetful())


def test_in_development_the_links_in_emails_follow_the_port_the_app_runs_on() -> None:
    script = (
        "import django; django.setup(); from django.conf import settings;"
        "from emails.unsubscribe import unsubscribe_url; print(unsubscribe_url(7))"
    )
    result = run_django(["-c", script], DJANGO_DEBUG="true", SITE_URL=None, PORT="8123", HOST="0.0.0.0")  # noqa: S104

    assert result.returncode == 0, result.stderr
    # What the run command prints for it: a browser here reaches every interface at loopback.
    assert result.stdout.startswith("http://127.0.0.1:8123/emails/unsubscribe/")


def test_in_development_mail_goes_without_tls_unless_asked() -> None:
    script = "import django; django.setup(); from django.conf import settings; print(settings.MAILERS)"

    plain = run_django(["-c", script], DJANGO_DEBUG="true", EMAIL_HOST="127.0.0.1", EMAIL_USE_TLS=None)
    asked = run_django(["-c", script], DJANGO_DEBUG="true", EMAIL_HOST="127.0.0.1", EMAIL_USE_TLS="true")

    assert "'use_tls': False" in plain.stdout, plain.stderr
    assert "'use_tls': True" in asked.stdout, asked.stderr


SHOW_PLANNER_SETTINGS = (
    "import django; django.setup(); from django.db import connection; cursor = connection.cursor(); "
    "cursor.execute('SHOW max_parallel_workers_per_gather'); print(cursor.fetchone()[0]); "
    "cursor.execute('SHOW statement_timeout'); print(cursor.fetchone()[0])"
)


def test_the_apps_connections_never_start_parallel_workers_and_keep_the_urls_own_options() -> None:
    url = os.environ["DATABASE_URL"]
    plain = run_django(["-c", SHOW_PLANNER_SETTINGS], DATABASE_URL=url)
    with_options = run_django(
        ["-c", SHOW_PLANNER_SETTINGS], DATABASE_URL=f"{url}?options=-c%20statement_timeout%3D7000"
    )

    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.split() == ["0", "0"]
    assert with_options.returncode == 0, with_options.stderr
    assert with_options.stdout.split() == ["0", "7s"]
