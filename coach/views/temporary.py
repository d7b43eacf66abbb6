"""A temporary conversation's page says when it is left (coach/temporary.py): closed, or
left for another page. Its script posts here as the page goes (a beacon, which nothing
waits on); the conversation is deleted a moment later unless a page of it is open then."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.views.decorators.http import require_POST

from coach.middleware import SignedInHttpRequest
from coach.temporary import temporary_conversation_left


@login_required
@require_POST
def conversation_left(request: SignedInHttpRequest, pk: int) -> HttpResponse:
    """The page showing this temporary conversation was left. Another person's
    conversation, or one that is not temporary, is not found."""
    if not temporary_conversation_left(user_id=request.user.pk, session_id=pk):
        raise Http404("No such temporary conversation.")
    return HttpResponse(status=204)
