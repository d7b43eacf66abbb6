"""WSGI entry point, for tools that want one; the app itself is served over ASGI."""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "coach.wiring.settings")

application = get_wsgi_application()
