"""The account page: email preferences, export, and erasing memories or the account."""

from __future__ import annotations

from collections.abc import Callable

from allauth.account.decorators import reauthentication_required as allauth_reauthentication_required
from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.export_archive import account_export_zip, export_name
from accounts.forgetting import account_delete, memories_delete_all_by_person
from accounts.forms import EmailPreferenceForm
from accounts.selectors import next_note_for_user
from accounts.services import user_time_zone_set
from accounts.views.partials import HtmxHttpRequest, wants_partial
from coach.change_limits import changes_counted
from emails.preferences import email_preference_update, email_resubscribe
from emails.selectors import email_preference_for_user
from memory.selectors import memory_list_for_user


def reauthentication_required[V: Callable[..., HttpResponse]](view: V) -> V:
    """allauth's decorator (the person re-enters their password first), with its type:
    allauth ships none."""
    asking_again: V = allauth_reauthentication_required(view)
    return asking_again


@login_required
@require_GET
def account(request: HtmxHttpRequest) -> HttpResponse:
    preference = email_preference_for_user(user=request.user)
    return render(
        request, "accounts/account.html", _preferences_context(request, EmailPreferenceForm(instance=preference))
    )


@login_required
@require_POST
@changes_counted
def email_resume(request: HtmxHttpRequest) -> HttpResponse:
    """Emails again after an unsubscribe, as the preferences say."""
    email_resubscribe(user=request.user)
    if not wants_partial(request):
        messages.success(request, "Your coach may email you again.")
        return redirect("account")
    form = EmailPreferenceForm(instance=email_preference_for_user(user=request.user))
    context = _preferences_context(request, form, resumed=True)
    return render(request, "accounts/account.html#email_preferences", context)


@login_required
@require_POST
@changes_counted
def email_preferences(request: HtmxHttpRequest) -> HttpResponse:
    """How often and when the coach may email; used by every email the app sends."""
    form = EmailPreferenceForm(request.POST, instance=email_preference_for_user(user=request.user))
    saved = form.is_valid()
    if saved:
        email_preference_update(user=request.user, **form.preferences())
        user_time_zone_set(user=request.user, time_zone=form.cleaned_data["time_zone"])
        if not wants_partial(request):
            messages.success(request, "Email preferences saved.")
            return redirect("account")
    context = _preferences_context(request, form, saved=saved)
    if wants_partial(request):
        return render(request, "accounts/account.html#email_preferences", context)
    return render(request, "accounts/account.html", context)


@login_required
@require_GET
@never_cache
@reauthentication_required
def account_export_start(request: HtmxHttpRequest) -> HttpResponse:
    """Where "Download my data" leads: the password first when it is due, then a page that
    starts the download. Linking to the file itself cannot work once the password is due:
    the browser would save the password form as the file, or leave the person on it."""
    return render(request, "accounts/export_started.html")


@login_required
@require_GET
@never_cache
# Everything the coach keeps, in one file: a stolen session must not be enough for it.
@reauthentication_required
def account_export(request: HtmxHttpRequest) -> HttpResponse:
    """Everything about the person, as one zip: the JSON and a page of it they can read."""
    now = timezone.now()
    response = HttpResponse(account_export_zip(user=request.user, now=now), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{export_name(now)}.zip"'
    return response


@login_required
@require_http_methods(["GET", "POST"])
@reauthentication_required
def memories_delete_all(request: HtmxHttpRequest) -> HttpResponse:
    """Forget every memory, history included, after the person re-enters their password."""
    if request.method == "GET":
        count = memory_list_for_user(user=request.user).count()
        return render(request, "accounts/delete_memories.html", {"count": count})
    count = memories_delete_all_by_person(user=request.user)
    messages.success(request, f"Deleted all {count} memories and their history. Your coach starts afresh.")
    return redirect("memories")


@login_required
@require_http_methods(["GET", "POST"])
@reauthentication_required
def account_delete_view(request: HtmxHttpRequest) -> HttpResponse:
    """Erase the account and every row about the person, after they re-enter their password."""
    if request.method == "GET":
        return render(request, "accounts/delete_account.html")
    user = request.user
    account_delete(user=user, hosts=[request.get_host()])
    logout(request)
    messages.success(request, "Your account and everything about you is deleted. Goodbye, and take care.")
    return redirect("account_login")


def _preferences_context(request: HtmxHttpRequest, form: EmailPreferenceForm, **extra: object) -> dict[str, object]:
    return {"preference_form": form, "next_note": next_note_for_user(user=request.user, now=timezone.now()), **extra}
