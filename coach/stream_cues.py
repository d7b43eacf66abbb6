"""Cues taken out of replies' streams when what they name is gone: a memory the person
deleted, a conversation they deleted. A reload replays no link to it."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable
from typing import Any

from coach.streams import MEMORY, TERMINAL, entries_of, reply_key
from infra.redis import redis_sync


def memory_cues_forget(message_ids: Iterable[int], memory_ids: Collection[int] | None) -> None:
    """Take the memory cues that name these memories (every cue, for None) out of these
    replies' streams, so that a memory the person deleted is not replayed to a reload."""
    _cues_forget(message_ids, lambda cue: memory_ids is None or cue.get("memory_id") in memory_ids)


def look_back_cues_forget(message_ids: Iterable[int], session_id: int) -> None:
    """Take the look-back cues that name the conversation `session_id` (deleted) out of
    these replies' streams, as memory_cues_forget does for a deleted memory: a reload
    replays no link to what is gone."""
    _cues_forget(
        message_ids,
        lambda cue: any(looked.get("session_id") == session_id for looked in cue.get("conversations") or []),
    )


def _cues_forget(message_ids: Iterable[int], naming_it: Callable[[dict[str, Any]], bool]) -> None:
    """Take the cues `naming_it` picks out of these replies' streams.

    A finished reply's stream that names one goes whole: its page shows the reply and its
    cues from the database, and its readers learn the outcome there. From a reply still
    being written, only the cues go, so its readers keep the words; Redis then only marks
    them deleted, and their bytes go with the stream (minutes after the reply ends)."""
    client = redis_sync()
    for message_id in message_ids:
        key = reply_key(message_id)
        entries = entries_of(client.xrange(key))
        naming = [
            entry_id
            for entry_id, fields in entries
            if fields.get("kind") == MEMORY and naming_it(json.loads(fields["data"]))
        ]
        if not naming:
            continue
        if any(fields.get("kind") in TERMINAL for _, fields in entries):
            client.delete(key)
        else:
            client.xdel(key, *naming)
