"""What every account view needs of an htmx request.

Pages render whole; an htmx request gets the named partial of the same template.
"""

from __future__ import annotations

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails

from accounts.models import User


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails
    user: User


def wants_partial(request: HtmxHttpRequest) -> bool:
    # A history restore (the back button after hx-push-url) needs the whole page.
    return bool(request.htmx) and not request.htmx.history_restore_request
