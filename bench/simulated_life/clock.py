"""The simulated clock: months of a person's life pass in minutes.

The app reads the time only through `django.utils.timezone.now()` (its models take no
database-side `now()` default), so the clock replaces that one function for the run, and
the model fields whose default is that function (`default=timezone.now` holds the
function itself, taken when the model was defined). The clock stands still between the
benchmark's moves, so a run's every timestamp, and so its figures, follow from the
persona and the seed alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta

from django.apps import apps
from django.db.models import Field
from django.utils import timezone


class SimulatedClock:
    def __init__(self, start: datetime) -> None:
        self._now = start.astimezone(UTC)

    def now(self) -> datetime:
        return self._now

    def today(self) -> date:
        """The UTC date, as the offline coach reckons "today" when a prompt states none."""
        return self._now.date()

    def move_to(self, moment: datetime) -> None:
        # Time never runs backwards: the app orders everything by it.
        self._now = max(self._now, moment.astimezone(UTC))

    def advance(self, delta: timedelta) -> None:
        self.move_to(self._now + delta)

    @contextmanager
    def running(self) -> Iterator[SimulatedClock]:
        """The app's clock is this one inside the block, and the real one again after."""
        real = timezone.now
        fields = [
            field
            for model in apps.get_models()
            for field in model._meta.get_fields()
            if isinstance(field, Field) and getattr(field, "default", None) is real
        ]
        timezone.now = self.now
        for field in fields:
            _set_default(field, self.now)
        try:
            yield self
        finally:
            timezone.now = real
            for field in fields:
                _set_default(field, real)


def _set_default(field: Field, default: object) -> None:
    field.default = default
    # Django caches the default's callable on the field the first time it is asked for.
    field.__dict__.pop("_get_default", None)
