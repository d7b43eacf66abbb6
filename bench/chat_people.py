"""What the chat benchmark drives: a person with a store of memories, one turn as the
browser takes it, and the model's time, kept apart so the app's own can be told.

Imported by bench/chat.py and bench/chat_load.py once Django is set up.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from datetime import timedelta

from django.conf import settings
from django.test import AsyncClient
from django.utils import timezone

from accounts.models import User
from coach.models import ChatSession
from infra import llm
from memory.models import Memory, key_digest
from offline_coach import bag_of_words_embedding

REPLY = "Good question. Let's keep it simple this week: three short sessions, and we review on Sunday."
STREAM_SECONDS = 2.0


class ModelClock:
    """Time spent waiting on the model, so it can be taken out of the app's own time."""

    def __init__(self) -> None:
        self.seconds = 0.0
        original = llm.stream_chat

        async def timed(*args: object, **kwargs: object) -> AsyncIterator[object]:
            started = time.perf_counter()
            async for piece in original(*args, **kwargs):
                self.seconds += time.perf_counter() - started
                yield piece
                started = time.perf_counter()
            self.seconds += time.perf_counter() - started

        llm.stream_chat = timed


def person(email: str, memories: int) -> User:
    user = User.objects.create_user(email, "bench-password", onboarded_at=timezone.now())
    now = timezone.now()
    Memory.objects.bulk_create(
        Memory(
            user=user,
            key=f"m-{i}",
            # bulk_create skips save(), which fills the keyed digest the key is found by.
            key_digest=key_digest(user.pk, f"m-{i}"),
            tier="episodic",
            category="episode" if i < 14 else "habit",
            source="coach",
            summary=f"Observation {i} about training",
            content=f"Observation {i}: " + "detail " * 30,
            embedding=bag_of_words_embedding(f"Observation {i} about training"),
            embedding_model=settings.EMBEDDING_MODEL,
            created_at=now - timedelta(days=memories - i),
            updated_at=now - timedelta(days=memories - i),
        )
        for i in range(memories)
    )
    return user


async def one_turn(client: AsyncClient, session: ChatSession, number: int) -> None:
    sent = await client.post(
        f"/chat/{session.pk}/messages", {"text": f"Question {number}: how was my week?"}, headers={"HX-Request": "true"}
    )
    # The page is handed the reply's stream address, as the browser is.
    stream_url = re.search(r'data-stream-url="([^"]+)"', sent.content.decode()).group(1)
    response = await client.get(stream_url)
    body = b"".join([chunk async for chunk in response.streaming_content])
    assert b"event: done" in body, body[-300:]
