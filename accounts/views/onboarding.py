"""The short, skippable set of questions a person meets at first login."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from accounts.forms import OnboardingForm
from accounts.services import OnboardingDone, onboarding_complete, onboarding_settings_keep, onboarding_skip
from accounts.views.partials import HtmxHttpRequest
from infra import llm

ALREADY_DONE = (
    "You have answered these questions already, so nothing was saved again. Change what your coach "
    "remembers on your memory page, and your settings on your account page."
)


@login_required
@require_http_methods(["GET", "POST"])
def onboarding(request: HtmxHttpRequest) -> HttpResponse:
    form = OnboardingForm(request.POST or None, time_zone=request.user.time_zone)
    if request.method == "GET":
        return render(request, "accounts/onboarding.html", {"form": form})
    valid = form.is_valid()
    if request.user.onboarded_at is not None:
        return _already_done(request, form)
    # Skipping skips the questions, not the settings: the zone the browser gave and an
    # email choice made are kept, whatever else the form holds.
    if "skip" in request.POST:
        onboarding_skip(user=request.user, **form.settings_chosen())
        return redirect("chat")
    if not valid:
        onboarding_settings_keep(user=request.user, **form.settings_chosen())
        return render(request, "accounts/onboarding.html", {"form": form})
    try:
        onboarding_complete(user=request.user, answers=form.answers(), **form.settings_chosen())
    except OnboardingDone:
        return _already_done(request, form)
    except llm.LLMError:
        form.add_error(None, "Your answers could not be saved just now; nothing is lost, please send them again.")
        return render(request, "accounts/onboarding.html", {"form": form})
    return redirect("chat")


def _already_done(request: HtmxHttpRequest, form: OnboardingForm) -> HttpResponse:
    # Taken once: a second post would add every answer again, as protected memories.
    form.errors.clear()
    form.add_error(None, ALREADY_DONE)
    return render(request, "accounts/onboarding.html", {"form": form}, status=429)
