"""The memory page: every memory, grouped by tier, and every action on one.

A memory is found by its id among the requester's own, so another person's id is a 404
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

from accounts.forgetting import memory_delete_by_person
from accounts.forms import MemoryEditForm, MemoryFilterForm, MemoryForm
from accounts.pages import MemoryFilters, MemoryPage, forgotten_memory, memory_row, undo_offer
from accounts.selectors import (
    context_report_for_user,
    forgotten_memories_for_user,
    memory_history_page_for_user,
    memory_page_for_user,
)
from accounts.services import memory_add_by_person
from accounts.views.partials import HtmxHttpRequest, wants_partial
from coach.change_limits import changes_counted
from memory.corrections import DetailsMayBeStale
from memory.drafts import MemoryFull, MemoryInvalid, MemoryNotFound, MemoryNotRestorable, ProposalOutdated
from memory.models import Memory
from memory.selectors import (
    memory_history_for_user,
    memory_list_for_user,
    recently_forgotten_for_user,
)
from memory.services import (
    memory_edit_by_user,
    memory_keep,
    memory_restore,
    memory_undo_delete,
)
from memory.undo import undo_minutes


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
@changes_counted
def memory_add(request: HtmxHttpRequest) -> HttpResponse:
    """A memory the person writes ("always remember this"), kept for good."""
    form = MemoryForm(request.POST, time_zone=request.user.time_zone)
    if form.is_valid():
        try:
            memory, look_alikes = memory_add_by_person(user=request.user, draft=form.draft())
        except MemoryInvalid as error:
            _add_errors(form, error.errors)
        except MemoryFull as full:
            form.add_error(None, str(full))
        else:
            if wants_partial(request):
                context = {
                    "add_form": MemoryForm(),
                    "saved": True,
                    "row": memory_row(memory),
                    "page": memory_page_of(request),
                    "look_alikes": look_alikes,
                }
                return render(request, "accounts/memories.html#memory_added", context)
            alike = (
                f" It reads like {len(look_alikes)} other memory of yours: see “These look alike” to merge them "
                "or keep both."
                if look_alikes
                else ""
            )
            messages.success(
                request,
                f"Saved. Your coach will always remember this. Filed under {memory.get_category_display()}: "
                f"Edit changes it.{alike}",
            )
            return redirect(memory_anchor(memory.pk))
    if wants_partial(request):
        return render(request, "accounts/memories.html#add_form", {"add_form": form})
    return render(request, "accounts/memories.html", _page_context(request, add_form=form))


@login_required
@require_GET
@vary_on_headers("HX-Request")
def memory_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """One memory and its whole history; for htmx, the memory's row (an edit cancelled)."""
    memory = memory_list_for_user(user=request.user).filter(pk=pk).first()
    if wants_partial(request):
        if memory is None:
            raise Http404
        return render(request, "accounts/memories.html#memory_row", {"row": memory_row(memory)})
    return _render_detail(request, pk, memory)


@login_required
@require_GET
@vary_on_headers("HX-Request")
def memory_history(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """What happened to one memory, event by event; it outlives the memory itself."""
    memory = memory_list_for_user(user=request.user).filter(pk=pk).first()
    if wants_partial(request):
        history = memory_history_page_for_user(user=request.user, memory_id=pk, page=_page_number(request))
        if memory is None and not history:
            raise Http404
        return render(request, "accounts/memory_detail.html#history", {"history": history, "memory_id": pk})
    return _render_detail(request, pk, memory)


@login_required
@require_GET
@vary_on_headers("HX-Request")
def memories_forgotten(request: HtmxHttpRequest) -> HttpResponse:
    """More of what the coach forgot lately, a page at a time."""
    forgotten = forgotten_memories_for_user(user=request.user, now=timezone.now(), page=_page_number(request))
    context = {"forgotten": forgotten, "forgotten_days": settings.MEMORY_FORGOTTEN_DAYS}
    if wants_partial(request):
        return render(request, "accounts/forgotten.html#forgotten_page", context)
    return render(request, "accounts/forgotten.html", context)


@login_required
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
@changes_counted
def memory_edit(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Correct a memory in place. Saving makes it the person's own, hence protected."""
    current = memory_list_for_user(user=request.user).filter(pk=pk).first()
    if request.method == "GET":
        if current is None:
            raise Http404
        form = MemoryEditForm(
            initial={**MemoryForm.initial_for(current, time_zone=request.user.time_zone), "version": current.version},
            memory_id=pk,
            current_due_at=current.due_at,
            current_category=current.category,
            current_due_month_only=current.due_month_only,
            time_zone=request.user.time_zone,
        )
        return _render_edit(request, current, form)

    if current is None:
        return _gone_or_404(request, pk, form=MemoryEditForm(request.POST, memory_id=pk))
    form = MemoryEditForm(
        request.POST,
        memory_id=pk,
        current_due_at=current.due_at,
        current_category=current.category,
        current_due_month_only=current.due_month_only,
        time_zone=request.user.time_zone,
    )
    if form.is_valid():
        try:
            memory = memory_edit_by_user(
                user=request.user,
                memory_id=pk,
                draft=form.draft(),
                expected_version=form.cleaned_data["version"],
                old_details=form.old_details_answer(),
            )
        except DetailsMayBeStale as error:
            return _render_edit(request, current, form, stale_details=error.details)
        except MemoryInvalid as error:
            _add_errors(form, error.errors)
        except MemoryFull as full:
            form.add_error(None, str(full))
        except MemoryNotFound:
            return _gone_or_404(request, pk, form=form)
        except ProposalOutdated as error:
            # Keep every word typed, show what is saved now, and let a second save win.
            current = memory_list_for_user(user=request.user).filter(pk=pk).first()
            if current is None:
                return _gone_or_404(request, pk, form=form)
            data = request.POST.copy()
            data["version"] = str(current.version)
            form = MemoryEditForm(
                data,
                memory_id=pk,
                current_due_at=current.due_at,
                current_category=current.category,
                current_due_month_only=current.due_month_only,
                time_zone=request.user.time_zone,
            )
            form.is_valid()
            form.add_error(None, str(error))
            return _render_edit(request, current, form, changed_meanwhile=True)
        else:
            if wants_partial(request):
                return render(request, "accounts/memories.html#memory_row", {"row": memory_row(memory), "saved": True})
            messages.success(request, "Saved. Your coach now remembers it this way, and will not forget it.")
            return redirect(memory_anchor(pk))
    return _render_edit(request, current, form)


@login_required
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
@changes_counted
def memory_delete_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """GET asks for confirmation; POST deletes the memory, its embedding and its history's text."""
    if request.method == "GET":
        memory = get_object_or_404(memory_list_for_user(user=request.user), pk=pk)
        context = {"row": memory_row(memory), "undo_minutes": undo_minutes()}
        if wants_partial(request):
            return render(request, "accounts/memory_delete.html#delete_confirm", context)
        return render(request, "accounts/memory_delete.html", context)

    try:
        deleted = memory_delete_by_person(user=request.user, memory_id=pk)
    except MemoryNotFound:
        # Deleted twice (two tabs): done all the same. A memory never theirs is a 404.
        if not memory_history_for_user(user=request.user, memory_id=pk).exists():
            raise Http404 from None
        deleted = None
    context = {"memory_id": pk, "undo": undo_offer(deleted) if deleted else None}
    if wants_partial(request):
        return render(
            request, "accounts/memories.html#memory_deleted_response", {**context, "page": memory_page_of(request)}
        )
    # Without JavaScript the page comes back with the Undo on it, rather than a redirect:
    # the undo would otherwise have to wait for the next page in the session, on the server.
    return render(request, "accounts/memories.html", {**_page_context(request), "deleted": context})


@login_required
@require_POST
@changes_counted
def memory_undo_delete_view(request: HtmxHttpRequest) -> HttpResponse:
    """Bring back a memory the person just deleted, exactly as it was, from the undo
    their page held; the server kept nothing of it."""
    try:
        memory = memory_undo_delete(user=request.user, token=request.POST.get("token", ""))
    except (MemoryNotRestorable, MemoryFull) as refused:
        if wants_partial(request):
            memory_id = request.POST.get("memory_id", "")
            context = {"memory_id": int(memory_id) if memory_id.isdigit() else 0, "error": str(refused)}
            return render(request, "accounts/memories.html#memory_deleted", context, status=409)
        messages.error(request, str(refused))
        return redirect("memories")
    if wants_partial(request):
        context = {"row": memory_row(memory), "saved": True, "page": memory_page_of(request)}
        return render(request, "accounts/memories.html#memory_undone", context)
    messages.success(request, "Undone: it is back, as it was.")
    return redirect(memory_anchor(memory.pk))


@login_required
@require_POST
@changes_counted
def memory_keep_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Protect a memory from being forgotten, without changing a word of it."""
    get_object_or_404(memory_list_for_user(user=request.user), pk=pk)
    try:
        memory = memory_keep(user=request.user, memory_id=pk)
    except MemoryNotFound:
        raise Http404 from None
    if wants_partial(request):
        context = {**_page_context(request), "row": memory_row(memory), "oob": True}
        return render(request, "accounts/memories.html#memory_kept", context)
    messages.success(request, "Kept. Your coach will not forget this one.")
    return redirect(memory_anchor(pk))


@login_required
@require_POST
@changes_counted
def memory_restore_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Bring back a memory the coach forgot to make room; it comes back protected."""
    event = get_object_or_404(
        recently_forgotten_for_user(user=request.user, now=timezone.now(), days=settings.MEMORY_FORGOTTEN_DAYS),
        pk=pk,
    )
    try:
        memory = memory_restore(user=request.user, event_id=event.pk)
    except (MemoryNotRestorable, MemoryInvalid, MemoryFull) as error:
        if wants_partial(request):
            context = {"item": forgotten_memory(event), "error": str(error)}
            return render(request, "accounts/memories.html#forgotten_item", context)
        messages.error(request, str(error))
        return redirect(reverse("memories") + "#forgotten")
    if wants_partial(request):
        context = {"row": memory_row(memory), "page": memory_page_of(request)}
        return render(request, "accounts/memories.html#memory_restored", context)
    messages.success(request, "Restored. It is back, and your coach will not forget it again.")
    return redirect(memory_anchor(memory.pk))


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


def memory_anchor(memory_id: int) -> str:
    return f"{reverse('memories')}#memory-{memory_id}"


def memory_page_of(request: HtmxHttpRequest) -> MemoryPage:
    """The page as it stands after a change, for the counts and lists a partial updates
    out of band (the counts at the top, each tier's count, what is next to be forgotten)."""
    return memory_page_for_user(user=request.user, filters=MemoryFilters(), now=timezone.now())


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
    request: HtmxHttpRequest,
    memory: Memory,
    form: MemoryEditForm,
    *,
    changed_meanwhile: bool = False,
    stale_details: str = "",
) -> HttpResponse:
    context = {"memory": memory, "form": form, "changed_meanwhile": changed_meanwhile, "stale_details": stale_details}
    if wants_partial(request):
        return render(request, "accounts/memories.html#memory_edit", context)
    return render(request, "accounts/memory_edit.html", context)


def _render_detail(request: HtmxHttpRequest, pk: int, memory: Memory | None) -> HttpResponse:
    history = memory_history_page_for_user(user=request.user, memory_id=pk, page=_page_number(request))
    if memory is None and not history:
        raise Http404
    context = {"memory_id": pk, "row": memory_row(memory) if memory else None, "history": history}
    return render(request, "accounts/memory_detail.html", context)


def _page_number(request: HtmxHttpRequest) -> int:
    # A page number that is not one is the first page, not an error page.
    value = request.GET.get("page", "1")
    return max(1, min(int(value), 10_000)) if value.isdigit() else 1


def _gone_or_404(request: HtmxHttpRequest, pk: int, *, form: MemoryForm) -> HttpResponse:
    """An edit of a memory deleted or forgotten meanwhile: say so and keep what was typed.
    A memory the person never had is a 404, as for anyone else's."""
    if not memory_history_for_user(user=request.user, memory_id=pk).exists():
        raise Http404
    context = {"memory_id": pk, "form": form, "gone": True}
    if wants_partial(request):
        return render(request, "accounts/memories.html#memory_gone", context)
    return render(request, "accounts/memory_edit.html", context)
