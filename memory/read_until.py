"""Where a periodic job stopped reading rows that only ever grow, and from where it reads
next (memory.models.ReadUntil).

Commit order is not the order of the rows' times: one stamped just before a run may commit
just after it, so each read goes back MARGIN before where the last one stopped. What a job
finds again it must act on once (a unique key, or an act that changes nothing the second
time).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from memory.models import ReadUntil

MARGIN = timedelta(minutes=5)


def read_since(reader: str, *, now: datetime, lookback: timedelta) -> datetime:
    """From when `reader` reads this run: where it stopped, less MARGIN, but never further
    back than `lookback` (its first run, or after a long pause), and from `lookback` ago
    when it stopped after `now` (a clock set back)."""
    stopped = ReadUntil.objects.filter(reader=reader).values_list("until", flat=True).first()
    earliest = now - lookback
    if stopped is None or stopped > now:
        return earliest
    return max(earliest, stopped - MARGIN)


def read_until_set(reader: str, *, now: datetime) -> None:
    """`reader` has read everything up to `now`."""
    ReadUntil.objects.bulk_create(
        [ReadUntil(reader=reader, until=now)], update_conflicts=True, unique_fields=["reader"], update_fields=["until"]
    )
