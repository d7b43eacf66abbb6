"""Django for a benchmark: development settings against the services bin/bench started."""

from __future__ import annotations

import os
import secrets
import sys

from cryptography.fernet import Fernet


def django_for_benchmarks() -> None:
    if not os.environ.get("DATABASE_URL") or not os.environ.get("REDIS_URL"):
        sys.exit("run benchmarks with bin/bench, which starts a throwaway PostgreSQL and Redis")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "coach.wiring.settings")
    os.environ.setdefault("DJANGO_DEBUG", "true")
    os.environ.setdefault("DJANGO_SECRET_KEY", secrets.token_urlsafe(50))
    os.environ.setdefault("FIELD_ENCRYPTION_KEYS", Fernet.generate_key().decode())
    os.environ.setdefault("FIELD_LOOKUP_KEY", secrets.token_urlsafe(48))
    os.environ.setdefault("LOG_LEVEL", "WARNING")

    import django
    from django.core.management import call_command

    django.setup()
    from infra.startup import url_resolvers_filled

    # As the web process does at startup (coach/wiring/asgi.py): benchmarks measure the app as served.
    url_resolvers_filled()
    call_command("migrate", verbosity=0)
