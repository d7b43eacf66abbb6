"""The memory page: every memory, grouped by tier, and every action on one.

A memory is found by its key among the requester's own, so another person's key is a 404
that says nothing about whether it exists.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from accounts.forms import MemoryEditForm, MemoryFilterForm, MemoryForm
from accounts.pages import MemoryFilters, ProposalView, forgotten_memory, memory_history_entries, memory_row
from accounts.selectors import context_report_for_user, memory_page_for_user
from accounts.views.partials import HtmxHttpRequest, wants_partial
from memory.drafts import MemoryInvalid, MemoryNotFound, MemoryNotRestorable, ProposalOutdated
from memory.models import Memory
from memory.proposals import proposal_confirm, proposal_reject
from memory.selectors import (
    memory_history_for_user,
    memory_list_for_user,
    pending_proposals_for_user,
    recently_forgotten_for_user,
)
from memory.services import (
    memory_add_by_user,
    memory_delete,
    memory_edit_by_user,
    memory_keep,
    memory_restore,
)


@login_required
@require_GET
@vary_on_headers("HX-Request")
def memories(request: HtmxHttpRequest) -> HttpResponse:
    filter_form = MemoryFilterForm(request.GET)
    filters = MemoryFilters(
        tier=filter_form.value("tier"), category=filter_form.value("category"), q=filter_form.value("q").strip()
    )
    if wants_partial(request):
        return render(request, "accounts/memories.html#memory_groups", _page_context(request, filters=filters))
    return render(request, "accounts/memories.html", _page_context(request, filters=filters, filter_form=filter_form))


@login_required
@require_POST
def memory_add(request: HtmxHttpRequest) -> HttpResponse:
    """A memory the person writes ("always remember this"), kept for good."""
    form = MemoryForm(request.POST)
    if form.is_valid():
        try:
            memory = memory_add_by_user(user=request.user, draft=form.draft())
        except MemoryInvalid as error:
            _add_errors(form, error.errors)
        else:
            if wants_partial(request):
                context = {"add_form": MemoryForm(), "saved": True, "row": memory_row(memory)}
                return render(request, "accounts/memories.html#memory_added", context)
            messages.success(request, "Saved. Your coach will always remember this.")
            return redirect(_memory_anchor(memory.key))
    if wants_partial(request):
        return render(request, "accounts/memories.html#add_form", {"add_form": form})
    return render(request, "accounts/memories.html", _page_context(request, add_form=form))


@login_required
@require_GET
@vary_on_headers("HX-Request")
def memory_detail(request: HtmxHttpRequest, key: str) -> HttpResponse:
    """One memory and its whole history; for htmx, the memory's row (an edit cancelled)."""
    memory = memory_list_for_user(user=request.user).filter(key=key).first()
    if wants_partial(request):
        if memory is None:
            raise Http404
        return render(request, "accounts/memories.html#memory_row", {"row": memory_row(memory)})
    return _render_detail(request, key, memory)


@login_required
@require_GET
@vary_on_headers("HX-Request")
def memory_history(request: HtmxHttpRequest, key: str) -> HttpResponse:
    """What happened to one memory, event by event; it outlives the memory itself."""
    memory = memory_list_for_user(user=request.user).filter(key=key).first()
    if wants_partial(request):
        entries = memory_history_entries(memory_history_for_user(user=request.user, key=key))
        if memory is None and not entries:
            raise Http404
        return render(request, "accounts/memory_detail.html#history", {"entries": entries})
    return _render_detail(request, key, memory)


@login_required
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
def memory_edit(request: HtmxHttpRequest, key: str) -> HttpResponse:
    """Correct a memory in place. Saving makes it the person's own, hence protected."""
    current = memory_list_for_user(user=request.user).filter(key=key).first()
    if request.method == "GET":
        if current is None:
            raise Http404
        form = MemoryEditForm(
            initial={**MemoryForm.initial_for(current), "version": current.version},
            key=key,
            current_due_at=current.due_at,
        )
        return _render_edit(request, current, form)

    if current is None:
        return _gone_or_404(request, key, form=MemoryEditForm(request.POST, key=key))
    form = MemoryEditForm(request.POST, key=key, current_due_at=current.due_at)
    if form.is_valid():
        try:
            memory = memory_edit_by_user(
                user=request.user,
                key=key,
                draft=form.draft(key=key),
                expected_version=form.cleaned_data["version"],
            )
        except MemoryInvalid as error:
            _add_errors(form, error.errors)
        except MemoryNotFound:
            return _gone_or_404(request, key, form=form)
        except ProposalOutdated as error:
            # Keep every word typed, show what is saved now, and let a second save win.
            current = memory_list_for_user(user=request.user).filter(key=key).first()
            if current is None:
                return _gone_or_404(request, key, form=form)
            data = request.POST.copy()
            data["version"] = str(current.version)
            form = MemoryEditForm(data, key=key, current_due_at=current.due_at)
            form.is_valid()
            form.add_error(None, str(error))
            return _render_edit(request, current, form, changed_meanwhile=True)
        else:
            if wants_partial(request):
                return render(request, "accounts/memories.html#memory_row", {"row": memory_row(memory), "saved": True})
            messages.success(request, "Saved. Your coach now remembers it this way, and will not forget it.")
            return redirect(_memory_anchor(key))
    return _render_edit(request, current, form)


@login_required
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
def memory_delete_view(request: HtmxHttpRequest, key: str) -> HttpResponse:
    """GET asks for confirmation; POST deletes the memory, its embedding and its history's text."""
    if request.method == "GET":
        memory = get_object_or_404(memory_list_for_user(user=request.user), key=key)
        context = {"row": memory_row(memory)}
        if wants_partial(request):
            return render(request, "accounts/memory_delete.html#delete_confirm", context)
        return render(request, "accounts/memory_delete.html", context)

    try:
        memory_delete(user=request.user, key=key, actor="user")
    except MemoryNotFound:
        # Deleted twice (two tabs): done all the same. A key never theirs is a 404.
        if not memory_history_for_user(user=request.user, key=key).exists():
            raise Http404 from None
    if wants_partial(request):
        return HttpResponse("")
    messages.success(request, "Deleted. It is gone from your coach's memory, and its text from the history.")
    return redirect("memories")


@login_required
@require_POST
def memory_keep_view(request: HtmxHttpRequest, key: str) -> HttpResponse:
    """Protect a memory from being forgotten, without changing a word of it."""
    get_object_or_404(memory_list_for_user(user=request.user), key=key)
    try:
        memory = memory_keep(user=request.user, key=key)
    except MemoryNotFound:
        raise Http404 from None
    if wants_partial(request):
        context = {**_page_context(request), "row": memory_row(memory), "oob": True}
        return render(request, "accounts/memories.html#memory_kept", context)
    messages.success(request, "Kept. Your coach will not forget this one.")
    return redirect(_memory_anchor(key))


@login_required
@require_POST
def memory_restore_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Bring back a memory the coach forgot to make room; it comes back protected."""
    event = get_object_or_404(
        recently_forgotten_for_user(user=request.user, now=timezone.now(), days=settings.MEMORY_FORGOTTEN_DAYS),
        pk=pk,
    )
    try:
        memory = memory_restore(user=request.user, event_id=event.pk)
    except (MemoryNotRestorable, MemoryInvalid) as error:
        if wants_partial(request):
            context = {"item": forgotten_memory(event), "error": str(error)}
            return render(request, "accounts/memories.html#forgotten_item", context)
        messages.error(request, str(error))
        return redirect(reverse("memories") + "#forgotten")
    if wants_partial(request):
        return render(request, "accounts/memories.html#memory_restored", {"row": memory_row(memory)})
    messages.success(request, "Restored. It is back, and your coach will not forget it again.")
    return redirect(_memory_anchor(memory.key))


@login_required
@require_POST
def proposal_confirm_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Apply exactly the change the coach asked for and the person was shown."""
    proposal = get_object_or_404(pending_proposals_for_user(user=request.user), pk=pk)
    key = proposal.memory.key
    try:
        memory = proposal_confirm(user=request.user, proposal_id=proposal.pk)
    except (ProposalOutdated, MemoryInvalid) as error:
        if wants_partial(request):
            view = ProposalView(proposal=proposal, proposed=proposal.proposed_fields(), outdated=True)
            return render(request, "accounts/memories.html#proposal", {"item": view, "error": str(error)})
        messages.error(request, str(error))
        return redirect(reverse("memories") + "#proposals")
    if wants_partial(request):
        context = {"row": memory_row(memory) if memory else None, "key": key, "oob": True}
        return render(request, "accounts/memories.html#proposal_confirmed", context)
    messages.success(request, "Done: your coach's suggestion is applied." if memory else "Done: it is deleted.")
    return redirect(_memory_anchor(key) if memory else reverse("memories"))


@login_required
@require_POST
def proposal_reject_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Turn the coach's suggestion down; the memory stays exactly as it is."""
    proposal = get_object_or_404(pending_proposals_for_user(user=request.user), pk=pk)
    proposal_reject(user=request.user, proposal_id=proposal.pk)
    if wants_partial(request):
        return HttpResponse("")
    messages.success(request, "Turned down. The memory stays as it was.")
    return redirect("memories")


@login_required
@require_GET
@vary_on_headers("HX-Request")
def memories_context(request: HtmxHttpRequest) -> HttpResponse:
    """What the next chat turn would send the coach of this person's memory, and what it leaves out."""
    context = {"report": context_report_for_user(user=request.user, now=timezone.now())}
    if wants_partial(request):
        return render(request, "accounts/memories_context.html#report", context)
    return render(request, "accounts/memories_context.html", context)


# Helpers --------------------------------------------------------------------------------

# validate_draft names its fields after the model; the form names the due date by day.
_FORM_FIELDS = {"due_at": "due_date"}
_SUBJECTS = {
    "summary": "This",
    "content": "The details",
    "tier": "The tier",
    "category": "The category",
    "due_date": "The date",
}


def _add_errors(form: MemoryForm, errors: dict[str, str]) -> None:
    for field, message in errors.items():
        name = _FORM_FIELDS.get(field, field)
        subject = _SUBJECTS.get(name, "")
        text = f"{subject} {message}." if subject and not message[0].isupper() else message
        form.add_error(name if name in form.fields else None, text[0].upper() + text[1:])


def _memory_anchor(key: str) -> str:
    return f"{reverse('memories')}#memory-{key}"


def _page_context(
    request: HtmxHttpRequest,
    *,
    filters: MemoryFilters | None = None,
    filter_form: MemoryFilterForm | None = None,
    add_form: MemoryForm | None = None,
) -> dict[str, object]:
    filters = filters or MemoryFilters()
    return {
        "page": memory_page_for_user(user=request.user, filters=filters, now=timezone.now()),
        "filters": filters,
        "filter_form": filter_form or MemoryFilterForm(),
        "add_form": add_form or MemoryForm(),
    }


def _render_edit(
    request: HtmxHttpRequest, memory: Memory, form: MemoryEditForm, *, changed_meanwhile: bool = False
) -> HttpResponse:
    context = {"memory": memory, "form": form, "changed_meanwhile": changed_meanwhile}
    if wants_partial(request):
        return render(request, "accounts/memories.html#memory_edit", context)
    return render(request, "accounts/memory_edit.html", context)


def _render_detail(request: HtmxHttpRequest, key: str, memory: Memory | None) -> HttpResponse:
    entries = memory_history_entries(memory_history_for_user(user=request.user, key=key))
    if memory is None and not entries:
        raise Http404
    context = {"key": key, "row": memory_row(memory) if memory else None, "entries": entries}
    return render(request, "accounts/memory_detail.html", context)


def _gone_or_404(request: HtmxHttpRequest, key: str, *, form: MemoryForm) -> HttpResponse:
    """An edit of a memory deleted or forgotten meanwhile: say so and keep what was typed.
    A key the person never had is a 404, as for anyone else's."""
    if not memory_history_for_user(user=request.user, key=key).exists():
        raise Http404
    context = {"key": key, "form": form, "gone": True}
    if wants_partial(request):
        return render(request, "accounts/memories.html#memory_gone", context)
    return render(request, "accounts/memory_edit.html", context)
