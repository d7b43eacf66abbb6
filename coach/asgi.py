"""ASGI entry point: uvicorn serves the app, so a streaming reply holds no worker."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "coach.settings")

application = get_asgi_application()
