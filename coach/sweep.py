"""The sweep each web process runs beside its turns, every COACH_TURN_SWEEP_SECONDS.

Its first run is as the process starts, so the turns its dead predecessor held on this
host are failed at once (coach/liveness.py), and their readers, reconnecting to it, hear
so. From then on it also judges heartbeats: a turn silent for COACH_TURN_SILENT_SECONDS
lost its process, wherever that ran. Only while this process has reached the database
for that long itself: after an outage, turns are given the time to beat again before
their silence counts against them.
"""

from __future__ import annotations

import asyncio
import logging
import time

from django.conf import settings

from coach.claims import turns_sweep
from infra.dbsteps import db_step

logger = logging.getLogger(__name__)


class DatabaseReach:
    """Since when this process has reached the database without a break, as its sweeps
    saw it: a failed sweep, or one that took too long (a database frozen for a while),
    starts the count again."""

    def __init__(self) -> None:
        self._since: float | None = None

    def silent_seconds(self) -> float | None:
        """The silence that marks a turn dead, once the database has answered for that
        long; None before."""
        silent = settings.COACH_TURN_SILENT_SECONDS
        if self._since is None or time.monotonic() - self._since < silent:
            return None
        return silent

    def answered(self, *, started: float) -> None:
        finished = time.monotonic()
        if finished - started > settings.COACH_TURN_SWEEP_SECONDS:
            self._since = finished
        elif self._since is None:
            self._since = started

    def failed(self) -> None:
        self._since = None


async def sweep_forever() -> None:
    """Sweep now, then every COACH_TURN_SWEEP_SECONDS, until cancelled."""
    reach = DatabaseReach()
    while True:
        started = time.monotonic()
        try:
            ended = await db_step(turns_sweep, silent_seconds=reach.silent_seconds())
        except Exception as error:
            reach.failed()
            logger.warning("the sweep of dead turns could not run (%s)", error)
        else:
            reach.answered(started=started)
            if ended:
                logger.info("the sweep failed %s turns whose process is gone", ended)
        await asyncio.sleep(settings.COACH_TURN_SWEEP_SECONDS)
