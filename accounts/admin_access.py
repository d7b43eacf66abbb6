"""Who may enter the admin, and how.

The admin signs in through allauth, like everyone else, so allauth's rate limits apply
to it; and it asks staff for a second factor (an authenticator app) used in this very
session. A staff member without one is sent to set it up; one who signed in without it
is asked for a code again. Staff cannot raise their own rights (see accounts/admin.py).
"""

from __future__ import annotations

from collections.abc import Callable

from allauth.account.authentication import get_authentication_records
from allauth.account.decorators import secure_admin_login
from allauth.mfa.utils import is_mfa_enabled
from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.http import urlencode

SET_UP_SECOND_FACTOR = "The admin asks for a second factor. Set up an authenticator app, then come back."
ENTER_CODE = "The admin asks for your authenticator code for this session."


def used_second_factor(request: HttpRequest) -> bool:
    """Whether this session's sign-in (or a later re-check) used the second factor."""
    return any(record.get("method") == "mfa" for record in get_authentication_records(request, request.user))


def staff_may_enter(request: HttpRequest) -> bool:
    user = request.user
    return bool(user.is_authenticated and user.is_active and user.is_staff and used_second_factor(request))


def admin_login(login: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """The admin's login page: allauth's sign-in first, then the second factor."""
    through_allauth = secure_admin_login(login)

    def view(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        user = request.user
        if user.is_authenticated and user.is_active and user.is_staff and not used_second_factor(request):
            back = request.GET.get("next") or reverse("admin:index")
            if not is_mfa_enabled(user):
                messages.info(request, SET_UP_SECOND_FACTOR)
                return redirect(reverse("mfa_activate_totp") + "?" + urlencode({"next": back}))
            messages.info(request, ENTER_CODE)
            return redirect(reverse("mfa_reauthenticate") + "?" + urlencode({"next": back}))
        # allauth is untyped: its view answers with a page.
        response: HttpResponse = through_allauth(request, *args, **kwargs)
        return response

    return view


def secure_the_admin() -> None:
    # The default site's own methods, replaced on purpose (the types allow no assignment to a method).
    admin.site.login = admin_login(admin.site.login)  # type: ignore[method-assign]
    admin.site.has_permission = staff_may_enter  # type: ignore[method-assign]
