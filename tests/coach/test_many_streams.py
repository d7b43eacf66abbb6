"""More replies streamed at once than redis-py's default pool holds (100): each web process's
pool is sized from the connections it accepts (WEB_MAX_CONNECTIONS, infra/redis.py), so
every reader, each blocked on its reply's Redis stream, is handed each piece live, and
none is left to find the reply in the database once it is over."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest
from django.test import Client
from django.utils import timezone
from redis import RedisError

from accounts.models import User
from coach import streams
from coach.models import Message
from coach.services import session_start
from infra.redis import async_pool_size
from tests.coach.sse import Event, read_events, session_cookie

# Past redis-py's default pool of 100, with room for the readers' own bookkeeping.
STREAMS = 130
ATTEMPT = "another-process-turn"


def being_answered(user: User, count: int) -> list[Message]:
    """`count` messages whose turns run in another web process: their replies reach this
    one's readers through Redis alone."""
    session = session_start(user=user)
    now = timezone.now()
    return [
        Message.objects.create(
            session=session,
            role="user",
            content=f"Question {n}",
            status="answering",
            claimed_at=now,
            claimed_by="another-host:1:a1b2c3",
            heartbeat_at=now,
            attempt=uuid.uuid4(),
        )
        for n in range(count)
    ]


async def write_to_each(messages: list[Message], kind: str, data: dict[str, str]) -> None:
    for message in messages:
        if kind == streams.DONE:
            await streams.reply_append(message.pk, kind, data, attempt=ATTEMPT)
        else:
            await streams.attempt_begin(message.pk, ATTEMPT)
            await streams.words_append(message.pk, kind, data, attempt=ATTEMPT)


@pytest.mark.django_db(transaction=True)
def test_130_replies_streamed_at_once_each_reach_their_reader_live(
    user: User, client: Client, live_app: str, settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.COACH_MAX_OPEN_STREAMS = STREAMS + 10
    # The other process's turns are alive throughout, however slow this machine is.
    settings.COACH_TURN_SILENT_SECONDS = 600
    assert async_pool_size() > 2 * STREAMS
    failed_reads: list[RedisError] = []
    original = streams.reply_read

    async def counted(message_id: int, *, after: str, block_seconds: float) -> list[streams.StreamEvent]:
        try:
            return await original(message_id, after=after, block_seconds=block_seconds)
        except RedisError as error:
            failed_reads.append(error)
            raise

    monkeypatch.setattr(streams, "reply_read", counted)
    client.force_login(user)
    cookie = session_cookie(client)
    messages = being_answered(user, STREAMS)
    opened = threading.Semaphore(0)
    received: dict[int, list[tuple[float, Event]]] = {message.pk: [] for message in messages}

    def follow(message: Message) -> None:
        url = f"{live_app}/chat/{message.session_id}/messages/{message.pk}/reply"
        for event in read_events(url, cookie=cookie, timeout=60, on_open=opened.release):
            received[message.pk].append((time.monotonic(), event))

    readers = [threading.Thread(target=follow, args=(message,), daemon=True) for message in messages]
    for reader in readers:
        reader.start()
    for _ in messages:
        assert opened.acquire(timeout=60), "a stream never opened"
    # Every reader is waiting on its stream; then each reply's first words come.
    time.sleep(1)
    asyncio.run(write_to_each(messages, streams.TEXT, {"text": "Three easy runs. "}))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(received.values()):
        time.sleep(0.1)
    words_seen_by = sum(1 for events in received.values() if events and events[0][1].name == streams.TEXT)
    ended_at = time.monotonic()
    asyncio.run(write_to_each(messages, streams.DONE, {"html": "<p>Three easy runs.</p>"}))
    for reader in readers:
        reader.join(timeout=60)

    assert words_seen_by == STREAMS, f"{STREAMS - words_seen_by} readers saw no words while the replies were written"
    assert failed_reads == []
    for events in received.values():
        assert [(event.name, event.data.get("text")) for _, event in events] == [
            ("text", "Three easy runs. "),
            ("done", None),
        ]
        assert events[0][0] < ended_at
