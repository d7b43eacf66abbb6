"""The memory's scheduled work."""

from __future__ import annotations

import pytest
from django.conf import settings

from accounts.models import User
from memory.models import Memory
from memory.tasks import reembed_memories
from offline_coach import ModelServer
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db


def test_the_hourly_task_re_embeds_what_another_model_embedded(user: User, model_server: ModelServer) -> None:
    make_memory(user, "long-run", summary="Saturday long run with her club")
    Memory.objects.update(embedding_model="an-older-model")

    assert reembed_memories() == 1

    assert list(Memory.objects.values_list("embedding_model", flat=True)) == [settings.EMBEDDING_MODEL]
    assert reembed_memories() == 0


def test_a_model_outage_leaves_the_rest_for_the_next_hour(user: User, model_server: ModelServer) -> None:
    make_memory(user, "long-run")
    Memory.objects.update(embedding_model="an-older-model")
    model_server.queue_embedding_error(503)

    assert reembed_memories() == 0

    assert list(Memory.objects.values_list("embedding_model", flat=True)) == ["an-older-model"]


def test_the_task_is_on_the_schedule() -> None:
    tasks = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}

    assert "memory.tasks.reembed_memories" in tasks
