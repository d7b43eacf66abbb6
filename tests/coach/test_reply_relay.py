"""A reader in the web process whose turn writes the reply is handed each piece there, as
it is written, instead of reading it back from Redis; it still replays from Redis what
came before it arrived. Whatever the timing, it sees exactly what the reply's Redis
stream holds: every event once, in order, with the ids a reconnect resumes from."""

from __future__ import annotations

import asyncio
import contextlib
import threading

import pytest

from coach import streams
from infra.redis import redis_sync

MESSAGE_ID = 424242
ATTEMPT = "a-turns-attempt"


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The blocking times of every read of the reply's Redis stream."""
    seen: list[float] = []
    original = streams.reply_read

    async def counted(message_id: int, *, after: str, block_seconds: float) -> list[streams.StreamEvent]:
        seen.append(block_seconds)
        return await original(message_id, after=after, block_seconds=block_seconds)

    monkeypatch.setattr(streams, "reply_read", counted)
    return seen


def in_redis() -> list[streams.StreamEvent]:
    return [streams._event(entry_id, fields) for entry_id, fields in redis_sync().xrange(streams.reply_key(MESSAGE_ID))]


async def follow_to_the_end(
    follower: streams.ReplyFollower, writing: asyncio.Future[None], *, after: str = "0"
) -> list[streams.StreamEvent]:
    seen: list[streams.StreamEvent] = []
    while not seen or not seen[-1].terminal:
        events = await follower.read(after=after, block_seconds=2)
        if not events and writing.done():
            writing.result()  # the writer's own failure, if that is why nothing came
        assert events, "the reader waited 2 s for a piece that had been written"
        seen += events
        after = events[-1].id
    return seen


async def write_reply(pieces: int, *, pause: float = 0.01) -> None:
    for number in range(pieces):
        await streams.words_append(MESSAGE_ID, streams.TEXT, {"text": f"piece {number} "}, attempt=ATTEMPT)
        await asyncio.sleep(pause)
    await streams.reply_append(MESSAGE_ID, streams.DONE, {"html": "<p>done</p>"}, attempt=ATTEMPT)


async def follow_while_it_is_written(pieces: int, *, here: bool) -> list[streams.StreamEvent]:
    """A reader from the start of a reply written by a turn of this process (`here`) or of
    another one."""
    with contextlib.ExitStack() as turn:
        if here:
            turn.enter_context(streams.written_here(MESSAGE_ID))
        with streams.ReplyFollower(MESSAGE_ID) as follower:
            writing = asyncio.ensure_future(write_reply(pieces))
            seen = await follow_to_the_end(follower, writing)
            await writing
    return seen


def test_a_reader_in_the_writing_process_reads_redis_once_then_is_handed_every_piece(reads: list[float]) -> None:
    seen = asyncio.run(follow_while_it_is_written(20, here=True))

    assert seen == in_redis()
    assert len(seen) == 21
    # One look at Redis for what came before the reader, without waiting; then nothing.
    assert reads == [0]


def test_a_reader_arriving_mid_reply_replays_the_words_so_far_then_follows_without_a_repeat(
    reads: list[float],
) -> None:
    async def scenario() -> list[streams.StreamEvent]:
        with streams.written_here(MESSAGE_ID):
            for number in range(5):
                await streams.words_append(MESSAGE_ID, streams.TEXT, {"text": f"early {number} "}, attempt=ATTEMPT)
            with streams.ReplyFollower(MESSAGE_ID) as follower:
                # Written after it subscribed but before it first reads: both in Redis and
                # handed to it.
                await streams.words_append(MESSAGE_ID, streams.TEXT, {"text": "between "}, attempt=ATTEMPT)
                writing = asyncio.ensure_future(write_reply(5))
                seen = await follow_to_the_end(follower, writing)
                await writing
        return seen

    seen = asyncio.run(scenario())

    assert [event.data.get("text") for event in seen[:6]] == [*(f"early {n} " for n in range(5)), "between "]
    assert seen == in_redis()
    assert len({event.id for event in seen}) == len(seen) == 12


def test_a_reconnect_with_its_last_event_id_is_handed_only_what_came_after() -> None:
    async def scenario() -> tuple[list[streams.StreamEvent], list[streams.StreamEvent]]:
        with streams.written_here(MESSAGE_ID):
            for number in range(5):
                await streams.words_append(MESSAGE_ID, streams.TEXT, {"text": f"early {number} "}, attempt=ATTEMPT)
            with streams.ReplyFollower(MESSAGE_ID) as first:
                before_drop = await first.read(after="0", block_seconds=2)
            with streams.ReplyFollower(MESSAGE_ID) as again:
                writing = asyncio.ensure_future(write_reply(10))
                rest = await follow_to_the_end(again, writing, after=before_drop[-1].id)
            await writing
        return before_drop, rest

    before_drop, rest = asyncio.run(scenario())

    assert len(before_drop) == 5
    assert before_drop + rest == in_redis()


def test_a_reader_on_another_loop_than_the_turn_is_handed_the_pieces_too(reads: list[float]) -> None:
    """The test client runs turns on a loop of their own, in a thread; a reader on the
    request's loop is handed their pieces across the two."""
    turn_loop = asyncio.new_event_loop()
    thread = threading.Thread(target=turn_loop.run_forever, daemon=True)
    thread.start()

    async def scenario() -> list[streams.StreamEvent]:
        with streams.written_here(MESSAGE_ID), streams.ReplyFollower(MESSAGE_ID) as follower:
            writing = asyncio.wrap_future(asyncio.run_coroutine_threadsafe(write_reply(10), turn_loop))
            seen = await follow_to_the_end(follower, writing)
            await writing
        return seen

    try:
        seen = asyncio.run(scenario())
    finally:
        turn_loop.call_soon_threadsafe(turn_loop.stop)
        thread.join(timeout=5)

    assert seen == in_redis()
    assert reads == [0]


def test_a_reader_whose_turn_runs_in_another_process_blocks_on_redis(reads: list[float]) -> None:
    seen = asyncio.run(follow_while_it_is_written(3, here=False))

    assert seen == in_redis()
    assert reads and all(blocking == 2 for blocking in reads)


def test_a_reader_that_leaves_is_no_longer_handed_anything() -> None:
    async def scenario() -> None:
        with streams.ReplyFollower(MESSAGE_ID):
            pass
        with streams.written_here(MESSAGE_ID):
            await write_reply(2)

    asyncio.run(scenario())

    assert MESSAGE_ID not in streams._followers
    assert MESSAGE_ID not in streams._written_here


def test_pieces_handed_over_together_come_out_in_the_order_they_were_written() -> None:
    pieces = [streams.StreamEvent(id=f"{n}-0", kind=streams.TEXT, data={"text": str(n)}) for n in (5, 6, 7)]

    async def scenario() -> list[streams.StreamEvent]:
        with streams.written_here(MESSAGE_ID), streams.ReplyFollower(MESSAGE_ID) as follower:
            reading = asyncio.ensure_future(follower.read(after="0", block_seconds=2))
            await asyncio.sleep(0.1)  # it has looked at Redis, and waits for what is handed over
            # All three before the reader wakes, as when its loop is busy elsewhere.
            for piece in pieces:
                follower.hand(piece)
            return await reading

    assert asyncio.run(scenario()) == pieces


def test_a_piece_in_redis_that_was_never_handed_over_is_read_from_redis_after_a_quiet_while() -> None:
    async def scenario() -> list[streams.StreamEvent]:
        with streams.written_here(MESSAGE_ID), streams.ReplyFollower(MESSAGE_ID) as follower:
            assert await follower.read(after="0", block_seconds=0.1) == []
            # Written to Redis by a turn cut off before it could hand the piece over.
            redis_sync().xadd(streams.reply_key(MESSAGE_ID), {"kind": streams.TEXT, "data": '{"text": "lost"}'})
            return await follower.read(after="0", block_seconds=0.2)

    assert [event.data for event in asyncio.run(scenario())] == [{"text": "lost"}]


def test_a_piece_handed_over_after_redis_gave_it_is_not_passed_on_again() -> None:
    old, new = (streams.StreamEvent(id=f"{n}-0", kind=streams.TEXT, data={"text": str(n)}) for n in (5, 6))

    async def scenario() -> list[streams.StreamEvent]:
        with streams.written_here(MESSAGE_ID), streams.ReplyFollower(MESSAGE_ID) as follower:
            assert await follower.read(after="0", block_seconds=0.1) == []
            # The reader has piece 5 from Redis; its hand-over arrives while it waits for 6.
            reading = asyncio.ensure_future(follower.read(after=old.id, block_seconds=2))
            await asyncio.sleep(0.05)
            follower.hand(old)
            await asyncio.sleep(0.05)
            follower.hand(new)
            return await reading

    assert asyncio.run(scenario()) == [new]
