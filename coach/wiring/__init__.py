"""The project's wiring: settings, URLs, the ASGI and WSGI entry points, the Celery app,
and the run command (its supervisor and the local services it starts). It stands above
every app and the chat below it; nothing below imports it (pyproject.toml's contracts)."""
