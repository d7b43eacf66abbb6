"""The memory switch on the account page (see accounts/memory_setting.py for what it does)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.memory_setting import MemorySettingForm, user_memory_set
from accounts.views.partials import HtmxHttpRequest, wants_partial
from coach.change_limits import changes_counted

TEMPLATE = "accounts/memory_setting.html"


@login_required
@require_POST
@changes_counted
def memory_setting(request: HtmxHttpRequest) -> HttpResponse:
    """Turn the coach's memory on or off; an answer that is neither changes nothing and says so."""
    form = MemorySettingForm(request.POST)
    section = f"{reverse('account')}#memory-setting"
    if not form.is_valid():
        if wants_partial(request):
            return render(request, TEMPLATE, {"memory_form": form}, status=422)
        messages.error(request, str(form.errors["memory"][0]))
        return redirect(section)
    user_memory_set(user=request.user, enabled=form.enabled)
    said = "Memory is on: your coach uses your memories again." if form.enabled else "Memory is off."
    if not wants_partial(request):
        messages.success(request, said)
        return redirect(section)
    return render(request, TEMPLATE, {"saved": said})
