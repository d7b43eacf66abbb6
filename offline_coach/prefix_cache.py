"""What a prefix-caching model server would have read from its cache for a request: the
longest stretch, from the start, that it shares with a request it answered lately, counted
in the server's own tokens. So a run without a key shows what a provider's cache would
save (OpenAI, vLLM and llama.cpp's server report the same figure)."""

from __future__ import annotations

import threading
from collections import deque

# Requests remembered: a few conversations' worth, as a server's cache keeps a few.
REMEMBERED = 64


class PrefixCache:
    def __init__(self) -> None:
        self._seen: deque[tuple[str, ...]] = deque(maxlen=REMEMBERED)
        self._lock = threading.Lock()

    def read(self, tokens: list[str]) -> int:
        """How many of `tokens`, from the first, a request seen lately began with too; then
        this request is remembered."""
        request = tuple(tokens)
        with self._lock:
            longest = max((_common_start(request, seen) for seen in self._seen), default=0)
            self._seen.append(request)
        return longest

    def forget(self) -> None:
        with self._lock:
            self._seen.clear()


def _common_start(one: tuple[str, ...], other: tuple[str, ...]) -> int:
    shared = 0
    for mine, theirs in zip(one, other, strict=False):
        if mine != theirs:
            break
        shared += 1
    return shared
