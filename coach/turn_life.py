"""An attempt at a turn staying alive: its heartbeat, learning it was given up on, and the
database steps that begin and end it, tried again while the database is away a moment."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError

from coach.claims import Attempt, turn_heartbeat
from infra.dbsteps import db_step

logger = logging.getLogger(__name__)

# A step the database refused (a connection lost, a restart under way) is tried again after
# each of these pauses before the turn gives up on it.
FINISH_RETRY_PAUSES_SECONDS = (0.25, 0.5, 1.0, 2.0, 4.0)


class Lost(Exception):
    """The attempt learnt that it no longer holds its message (its heartbeat was refused,
    or its stream belongs to another attempt)."""


class AttemptLife:
    """The attempt's heartbeat, every COACH_TURN_HEARTBEAT_SECONDS while it runs. A beat the
    database refuses is simply missed (the sweep allows for an outage); a beat that finds
    the message held by no one, or by another attempt, means this one was given up on: it
    is cancelled at once, whatever it waits for, and ends as lost."""

    def __init__(self, attempt: Attempt) -> None:
        self.attempt = attempt
        self.lost = False
        self._task: asyncio.Task[Any] | None = None
        self._cancelled = False
        self._finishing = False

    @contextlib.asynccontextmanager
    async def beating(self) -> AsyncIterator[None]:
        self._task = asyncio.current_task()
        beats = asyncio.create_task(self._beat())
        try:
            yield
        except asyncio.CancelledError:
            # Cancelled by lose(), which cancels only the task recorded here.
            if not self._cancelled or self._task is None:
                raise
            # Our own cancellation, for a lost attempt: it ends here, not the task.
            self._task.uncancel()
            logger.warning("turn for message %s was given up on; it stops", self.attempt.message_id)
        finally:
            beats.cancel()

    def lose(self) -> None:
        """Known lost from within the turn: it stops at its next step (self.check)."""
        self.lost = True

    def finishing(self) -> None:
        """The turn is recording its own end: a beat that finds the message no longer
        being answered has met that end, not another attempt's."""
        self._finishing = True

    def check(self) -> None:
        if self.lost:
            raise Lost(self.attempt.message_id)

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(settings.COACH_TURN_HEARTBEAT_SECONDS)
            try:
                held = await db_step(turn_heartbeat, attempt=self.attempt)
            except Exception as error:
                logger.warning("message %s: a heartbeat was missed (%s)", self.attempt.message_id, error)
                continue
            if not held:
                if self._finishing:
                    return
                # Whatever the turn waits for (the model's first words, a tool call), it
                # stops now: cancelled from this task, never from its own.
                self.lost = self._cancelled = True
                if self._task is not None:
                    self._task.cancel()
                return


async def finishing[R](step: Callable[..., R], **kwargs: Any) -> R:
    """A step that begins the turn or records how it ended, tried again while the database
    is away for a moment (a connection lost, a restart under way)."""
    for pause in (*FINISH_RETRY_PAUSES_SECONDS, None):
        try:
            return await db_step(step, **kwargs)
        except (OperationalError, InterfaceError) as error:
            if pause is None:
                raise
            logger.warning("recording a turn's end failed (%s); trying again in %s s", error, pause)
            await asyncio.sleep(pause)
    raise AssertionError("unreachable")


async def recorded(step: Callable[..., bool], **kwargs: Any) -> bool:
    """A finishing step whose failure the turn outlives: whether it was recorded."""
    try:
        return await finishing(step, **kwargs)
    except Exception:
        logger.exception("a turn's end could not be recorded (%s)", getattr(step, "__name__", step))
        return False
