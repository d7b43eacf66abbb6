"""The short, skippable set of questions a person meets at first login."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from accounts.forms import OnboardingForm
from accounts.services import onboarding_complete, onboarding_skip
from accounts.views.partials import HtmxHttpRequest
from infra import llm


@login_required
@require_http_methods(["GET", "POST"])
def onboarding(request: HtmxHttpRequest) -> HttpResponse:
    if request.method == "POST" and "skip" in request.POST:
        onboarding_skip(user=request.user)
        return redirect("chat")
    form = OnboardingForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            onboarding_complete(
                user=request.user, answers=form.answers(), time_zone=form.cleaned_data.get("time_zone", "")
            )
        except llm.LLMError:
            form.add_error(None, "Your answers could not be saved just now; nothing is lost, please send them again.")
        else:
            return redirect("chat")
    return render(request, "accounts/onboarding.html", {"form": form})
