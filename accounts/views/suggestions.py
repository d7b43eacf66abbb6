"""The coach's suggestions on the memory page, and the look-alike memories it offers to
merge: each answered by the person, once (a second answer, from another tab, is told so)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.forgetting import proposal_confirm_by_person
from accounts.pages import ProposalView, memory_row
from accounts.views.memories import memory_anchor, memory_page_of
from accounts.views.partials import HtmxHttpRequest, wants_partial
from coach.change_limits import changes_counted
from memory.drafts import MemoryFull, MemoryInvalid, MemoryNotFound, ProposalDecided, ProposalOutdated
from memory.overlaps import overlap_dismiss, overlap_merge
from memory.proposals import proposal_reject
from memory.selectors import overlaps_for_user, proposals_for_user


@login_required
@require_POST
@changes_counted
def proposal_confirm_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Apply exactly the change the coach asked for and the person was shown."""
    proposal = get_object_or_404(proposals_for_user(user=request.user), pk=pk)
    memory_id = proposal.memory_id
    try:
        memory = proposal_confirm_by_person(user=request.user, proposal=proposal)
    except ProposalDecided as decided:
        return _proposal_answered(request, proposal.pk, str(decided))
    except (ProposalOutdated, MemoryInvalid, MemoryFull) as error:
        if wants_partial(request):
            view = ProposalView(proposal=proposal, proposed=proposal.proposed_fields(), outdated=True)
            return render(request, "accounts/memories.html#proposal", {"item": view, "error": str(error)})
        messages.error(request, str(error))
        return redirect(reverse("memories") + "#proposals")
    if wants_partial(request):
        context = {
            "row": memory_row(memory) if memory else None,
            "memory_id": memory_id,
            "oob": True,
            "page": memory_page_of(request),
        }
        return render(request, "accounts/memories.html#proposal_confirmed", context)
    messages.success(request, "Done: your coach's suggestion is applied." if memory else "Done: it is deleted.")
    return redirect(memory_anchor(memory_id) if memory else reverse("memories"))


@login_required
@require_POST
@changes_counted
def proposal_reject_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Turn the coach's suggestion down; the memory stays exactly as it is."""
    proposal = get_object_or_404(proposals_for_user(user=request.user), pk=pk)
    try:
        proposal_reject(user=request.user, proposal_id=proposal.pk)
    except ProposalDecided as decided:
        return _proposal_answered(request, proposal.pk, str(decided))
    if wants_partial(request):
        return HttpResponse("")
    messages.success(request, "Turned down. The memory stays as it was.")
    return redirect("memories")


@login_required
@require_POST
@changes_counted
def overlap_merge_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Fold two memories that read alike into one, which becomes the person's own."""
    overlap = get_object_or_404(overlaps_for_user(user=request.user), pk=pk)
    try:
        kept = overlap_merge(user=request.user, overlap_id=overlap.pk)
    except MemoryNotFound as error:
        if wants_partial(request):
            context = {"overlap_id": overlap.pk, "message": str(error)}
            return render(request, "accounts/memories.html#overlap_done", context, status=409)
        messages.error(request, str(error))
        return redirect(reverse("memories") + "#overlaps")
    gone = overlap.other_id if kept.pk == overlap.memory_id else overlap.memory_id
    if wants_partial(request):
        context = {
            "overlap_id": overlap.pk,
            "row": memory_row(kept),
            "gone": gone,
            "message": "Merged into one. It is yours now, kept for good.",
            "page": memory_page_of(request),
        }
        return render(request, "accounts/memories.html#overlap_done", context)
    messages.success(request, "Merged into one memory, kept for good.")
    return redirect(memory_anchor(kept.pk))


@login_required
@require_POST
@changes_counted
def overlap_dismiss_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The two are different facts: keep both, and stop offering the pair."""
    overlap = get_object_or_404(overlaps_for_user(user=request.user), pk=pk)
    overlap_dismiss(user=request.user, overlap_id=overlap.pk)
    if wants_partial(request):
        context = {"overlap_id": overlap.pk, "message": "Kept both."}
        return render(request, "accounts/memories.html#overlap_done", context)
    messages.success(request, "Kept both.")
    return redirect(reverse("memories") + "#overlaps")


def _proposal_answered(request: HtmxHttpRequest, proposal_id: int, message: str) -> HttpResponse:
    """A suggestion answered twice (two tabs, a double click): say so, change nothing."""
    if wants_partial(request):
        context = {"proposal_id": proposal_id, "message": message}
        return render(request, "accounts/memories.html#proposal_answered", context, status=409)
    messages.info(request, message)
    return redirect(reverse("memories") + "#proposals")
