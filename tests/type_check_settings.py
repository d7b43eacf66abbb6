"""Settings for the type checker alone: django-stubs loads Django to learn the models, and
the real settings refuse to load without their secrets and services. Placeholders stand in;
nothing is ever connected to, encrypted or served with them."""

import os
import secrets

from cryptography.fernet import Fernet

os.environ.setdefault("DJANGO_SECRET_KEY", secrets.token_urlsafe(50))
os.environ.setdefault("FIELD_ENCRYPTION_KEYS", Fernet.generate_key().decode())
os.environ.setdefault("FIELD_LOOKUP_KEY", secrets.token_urlsafe(48))
os.environ.setdefault("DJANGO_DEBUG", "true")
os.environ.setdefault("DATABASE_URL", "postgres://type-check@127.0.0.1:1/type-check")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:1/0")

from coach.wiring.settings import *  # noqa: F403 (the real settings, their environment set above)
