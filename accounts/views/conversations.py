"""What the coach keeps of each ended conversation (its summary), on the memory page: the
person may delete it, as they may any memory."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.views.partials import HtmxHttpRequest, wants_partial
from coach.change_limits import changes_counted
from coach.services import session_summary_forget


@login_required
@require_POST
@changes_counted
def conversation_summary_delete(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Delete a conversation's summary; the conversation itself stays. Another person's
    conversation, or one without a summary, is not found."""
    if not session_summary_forget(user=request.user, session_id=pk):
        raise Http404("No such summary.")
    if wants_partial(request):
        # An empty 200: hx-swap="outerHTML" removes the row.
        return HttpResponse("")
    messages.success(request, "Deleted. Your coach no longer keeps a summary of that conversation.")
    return redirect(reverse("memories") + "#conversation-summaries")
