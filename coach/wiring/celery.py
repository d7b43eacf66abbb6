"""The Celery app: Redis is the broker; tasks are found in each app's tasks.py."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "coach.wiring.settings")

app = Celery("coach")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
