"""Deleting a conversation, or what the coach keeps of it (its summary, on the memory page),
as the person may any memory (accounts/forgetting.py)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from accounts.forgetting import conversation_delete_by_person, summary_forget_by_person
from accounts.views.partials import HtmxHttpRequest, wants_partial
from coach.change_limits import changes_counted


@login_required
@require_POST
@changes_counted
def conversation_summary_delete(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Delete a conversation's summary; the conversation itself stays. Another person's
    conversation, or one without a summary, is not found."""
    if not summary_forget_by_person(user=request.user, session_id=pk):
        raise Http404("No such summary.")
    if wants_partial(request):
        # An empty 200: hx-swap="outerHTML" removes the row.
        return HttpResponse("")
    messages.success(request, "Deleted. Your coach no longer keeps a summary of that conversation.")
    return redirect(reverse("memories") + "#conversation-summaries")


@login_required
@require_POST
@changes_counted
def conversation_delete(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Delete the conversation for good (conversation_delete_by_person), then back to the
    chat. Another person's conversation is a 404, as if it did not exist."""
    if not conversation_delete_by_person(user=request.user, session_id=pk):
        raise Http404("No such conversation.")
    return HttpResponseClientRedirect(reverse("chat")) if request.htmx else redirect("chat")
