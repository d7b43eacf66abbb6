"""Filters for the app's log records, and uvicorn's."""

from __future__ import annotations

import logging

from celery.app.trace import LOG_RECEIVED, LOG_SUCCESS
from django.core.exceptions import PermissionDenied


class ForbiddenWithoutTraceback(logging.Filter):
    """A refused page (403) is logged as one line, without its traceback: a crawl of the
    admin by staff without a permission would otherwise bury the log in PermissionDenied
    tracebacks that say nothing but "forbidden"."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) == 403 and record.exc_info:
            error = record.exc_info[1]
            if isinstance(error, PermissionDenied):
                record.exc_info, record.exc_text = None, None
        return True


class QueryStringsLeftOut(logging.Filter):
    """uvicorn's access log, each request's path without its query string: a memory
    search's words (`/memories/?q=my+HIV+diagnosis`), or where a sign-in goes next, would
    otherwise be written to the log beside the person's address."""

    def filter(self, record: logging.LogRecord) -> bool:
        # uvicorn's access line: client, method, path with its query, HTTP version, status.
        # The path is percent-encoded, so its first "?" is where the query string begins.
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(target := args[2], str):
            record.args = (*args[:2], target.split("?", 1)[0], *args[3:])
        return True


def access_log_without_query_strings() -> None:
    """Leave query strings out of uvicorn's access log in this process (once)."""
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(existing, QueryStringsLeftOut) for existing in access.filters):
        access.addFilter(QueryStringsLeftOut())


class RoutineTaskLines(logging.Filter):
    """Celery's line for each task received and each that succeeded: with periodic tasks
    every few seconds they bury the run command's console (where a sign-up mail's link is
    looked for), so they show at LOG_LEVEL=DEBUG only. A retry, a failure and everything
    else Celery says still show."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg not in (LOG_RECEIVED, LOG_SUCCESS)
