"""The one-click unsubscribe link of every email.

RFC 8058: a mail client's unsubscribe button POSTs `List-Unsubscribe=One-Click` to the
link, with no cookies and no CSRF token; the signed token in the URL is the authority.
The POST is idempotent and takes effect at once. A GET (a person opening the link, or a
mail scanner following it) only shows a page with the button, and changes nothing.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from emails.preferences import email_unsubscribe
from emails.unsubscribe import user_id_from_token


@csrf_exempt
@never_cache
@require_http_methods(["GET", "POST"])
def unsubscribe(request: HttpRequest, token: str) -> HttpResponse:
    user_id = user_id_from_token(token)
    if user_id is None:
        return render(request, "emails/unsubscribe.html", {"state": "invalid"}, status=400)
    if request.method == "GET":
        return render(request, "emails/unsubscribe.html", {"state": "confirm"})
    email_unsubscribe(user_id=user_id)
    return render(request, "emails/unsubscribe.html", {"state": "done"})
