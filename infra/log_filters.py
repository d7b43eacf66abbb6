"""Filters for the app's log records."""

from __future__ import annotations

import logging

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
