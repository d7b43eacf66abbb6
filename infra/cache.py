"""Forgetting what the cache holds about someone.

Django's cache has no "delete by pattern"; Redis does, through SCAN. Used when a person
is erased: what third-party code (allauth's rate limits) counted about them goes too.
"""

from __future__ import annotations

from collections.abc import Iterable

import redis
from django.conf import settings

SCAN_BATCH = 500


def cache_delete_matching(patterns: Iterable[str]) -> int:
    """Delete every key of the default cache matching any of `patterns` (glob-style, on the
    key as Django names it, before its prefix and version). Returns how many went."""
    config = settings.CACHES["default"]
    prefix = f"{config.get('KEY_PREFIX', '')}:{config.get('VERSION', 1)}:"
    client = redis.Redis.from_url(config["LOCATION"], socket_connect_timeout=2, socket_timeout=2)
    deleted = 0
    try:
        for pattern in patterns:
            batch = list(client.scan_iter(match=prefix + pattern, count=SCAN_BATCH))
            if batch:
                deleted += client.delete(*batch)
    finally:
        client.close()
    return deleted
