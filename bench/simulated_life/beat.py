"""Celery beat, on the simulated clock: the jobs of CELERY_BEAT_SCHEDULE, run in this
process as a worker would run them.

Every simulated hour, each job whose crontab names that hour runs once, at its first
minute (a quarter-hourly planning job at :00 or :05, the hourly episode planning at :10,
the nightly pruning at 3:25), and each job on an interval (every 5 s to 5 min) runs once,
at the top of the hour. Every job picks up whatever is due when it runs (the planning
queries ask "who is due now?", not "who became due this minute?"), so an hour's sampling
delays an email or a summary by up to an hour and misses nothing; a full beat would be
twelve times the work. Tasks the jobs send (each email, each summary) run at once,
eagerly, in the same process.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from celery.schedules import crontab
from django.conf import settings

from coach.wiring.celery import app


@dataclass(frozen=True)
class Job:
    name: str
    task: str
    schedule: object

    def minute_in(self, hour: datetime) -> int | None:
        """The minute of `hour` (a UTC hour) this job runs at, or None if it does not."""
        schedule = self.schedule
        if not isinstance(schedule, crontab):
            return 0
        day_of_week = (hour.isoweekday()) % 7  # crontab counts Sunday as 0
        if (
            hour.hour in schedule.hour
            and day_of_week in schedule.day_of_week
            and hour.day in schedule.day_of_month
            and hour.month in schedule.month_of_year
        ):
            return min(schedule.minute)
        return None


def jobs() -> list[Job]:
    """The beat schedule as settings declare it."""
    found = [Job(name, entry["task"], entry["schedule"]) for name, entry in settings.CELERY_BEAT_SCHEDULE.items()]
    for job in found:
        importlib.import_module(job.task.rsplit(".", 1)[0])
    return found


def ticks(start: datetime, end: datetime, schedule: list[Job]) -> Iterator[tuple[datetime, Job]]:
    """Each (moment, job) beat runs after `start` and up to `end`, in order."""
    hour = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    while hour <= end:
        planned = []
        for order, job in enumerate(schedule):
            minute = job.minute_in(hour)
            if minute is not None:
                moment = hour + timedelta(minutes=minute)
                if start < moment <= end:
                    planned.append((moment, isinstance(job.schedule, crontab), order, job))
        for moment, _, _, job in sorted(planned, key=lambda item: item[:3]):
            yield moment, job
        hour += timedelta(hours=1)


def run(job: Job) -> None:
    app.tasks[job.task].apply(throw=True)


@contextmanager
def tasks_run_at_once() -> Iterator[Callable[[Job], None]]:
    """Tasks sent by a job (`delay`, `delay_on_commit`) run in this process when sent."""
    before = app.conf.task_always_eager, app.conf.task_eager_propagates
    app.conf.task_always_eager = app.conf.task_eager_propagates = True
    try:
        yield run
    finally:
        app.conf.task_always_eager, app.conf.task_eager_propagates = before
