"""Bringing in what another assistant knows about the person: the prompt to ask it with,
its pasted answer split into proposed memories, and saving the ones the person ticks.

Nothing is kept between the paste and the save, and nothing of either goes into a URL:
the review form carries the proposals (and the paste, to split it again), so only what
is ticked ever becomes a row.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from accounts.views.partials import HtmxHttpRequest
from coach.limits import within_rate
from infra.llm import LLMError
from memory.drafts import MemoryFull
from memory.imports.review import IMPORT_MAX_FACTS, ImportRoom, import_room_for_user, import_split
from memory.imports.saving import ImportInvalid, ImportOutcome, memories_import
from memory.imports.splitting import IMPORT_CATEGORIES, IMPORT_MAX_CHARS, ImportRefused, Proposal, import_text_clean
from memory.models import SUMMARY_MAX_CHARS, Category, Tier

SUMMARY_LABEL = "What your coach should remember"
TOO_MANY_IMPORTS = (
    "You have imported a lot in the last hour. Wait a while, then try again: nothing you pasted was sent or saved."
)
HOUR_SECONDS = 3600


def _within_import_rate(request: HtmxHttpRequest, name: str) -> bool:
    # Each split asks the model, each save embeds in bulk: counted per person, per hour.
    return within_rate(request.user.pk, name, limit=settings.MEMORY_IMPORTS_PER_HOUR, window_seconds=HOUR_SECONDS)


class PasteForm(forms.Form):
    # No maxlength: a browser would cut a long paste short without a word. The page's
    # script says what is too long before sending; the server says it again without one.
    text = forms.CharField(
        label="The assistant's answer",
        required=False,
        strip=False,
        help_text=f"Paste it as the assistant wrote it, up to {IMPORT_MAX_CHARS:,} characters.",
        widget=forms.Textarea(attrs={"rows": 14, "data-max-chars": IMPORT_MAX_CHARS, "spellcheck": "false"}),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("auto_id", "import-%s")
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)

    def clean_text(self) -> str:
        try:
            return import_text_clean(self.cleaned_data["text"])
        except ImportRefused as refused:
            raise ValidationError(str(refused)) from None


class ProposalForm(forms.Form):
    """One proposed memory, as the person ticks and edits it."""

    keep = forms.BooleanField(label="Save this", required=False)
    # Two lines, so the whole fact shows on a phone; a summary is one line once saved.
    summary = forms.CharField(label=SUMMARY_LABEL, required=False, widget=forms.Textarea(attrs={"rows": 2}))
    details = forms.CharField(label="Details (optional)", required=False, widget=forms.Textarea(attrs={"rows": 2}))
    category = forms.ChoiceField(
        label="Category",
        choices=[(value, Category(value).label) for value in IMPORT_CATEGORIES],
        error_messages={"invalid_choice": "“%(value)s” is not a category; choose one from the list."},
    )
    tier = forms.ChoiceField(
        label="Tier",
        choices=[
            (Tier.PROFILE, "Profile: who you are"),
            (Tier.EPISODIC, "Episodic: something that happened"),
            (Tier.PROSPECTIVE, "Prospective: something to bring up later"),
        ],
        error_messages={"invalid_choice": "Choose profile, episodic or prospective."},
    )
    # It reads like a memory the person has, or like an earlier proposal of the same paste:
    # offered unticked, and said so.
    known = forms.BooleanField(required=False, widget=forms.HiddenInput)
    repeats = forms.BooleanField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)
        # No maxlength (a browser would cut a paste short): the counter and the save say it.
        self.fields["summary"].widget.attrs["data-limit"] = SUMMARY_MAX_CHARS
        self.fields["details"].widget.attrs["data-limit"] = settings.MEMORY_CONTENT_MAX_CHARS

    def proposal(self) -> Proposal:
        data = self.cleaned_data
        return Proposal(summary=data["summary"], details=data["details"], category=data["category"], tier=data["tier"])


ProposalFormSet = forms.formset_factory(
    ProposalForm, extra=0, max_num=IMPORT_MAX_FACTS, absolute_max=IMPORT_MAX_FACTS, validate_max=True
)
PREFIX = "fact"


@login_required
@require_http_methods(["GET", "POST"])
def memory_import(request: HtmxHttpRequest) -> HttpResponse:
    """GET: the prompt to ask another assistant with, and a box for its answer. POST: the
    answer split into proposals to review (nothing is saved), or why it cannot be."""
    if request.method == "GET":
        return render(request, "accounts/memory_import.html", {"form": PasteForm()})
    form = PasteForm(request.POST)
    if form.is_valid() and not _within_import_rate(request, "import_splits"):
        form.add_error("text", TOO_MANY_IMPORTS)
        return render(request, "accounts/memory_import.html", {"form": form}, status=429)
    if form.is_valid():
        try:
            split = import_split(user=request.user, text=form.cleaned_data["text"])
        except ImportRefused as refused:
            form.add_error("text", str(refused))
        else:
            initial = [
                {
                    "keep": not (proposal.known or proposal.repeats),
                    "summary": proposal.summary,
                    "details": proposal.details,
                    "category": proposal.category,
                    "tier": proposal.tier,
                    "known": proposal.known,
                    "repeats": proposal.repeats,
                }
                for proposal in split.proposals
            ]
            formset = ProposalFormSet(initial=initial, prefix=PREFIX)
            return _render_review(
                request, formset, form, room=split.room, by_model=split.by_model, from_prose=split.from_prose
            )
    return render(request, "accounts/memory_import.html", {"form": form})


@login_required
@require_POST
def memory_import_save(request: HtmxHttpRequest) -> HttpResponse:
    """Save the ticked proposals, as edited, as the person's own memories. Anything wrong
    is said beside the proposal it concerns, and then nothing is saved."""
    formset = ProposalFormSet(request.POST, prefix=PREFIX)
    paste = PasteForm(request.POST)
    paste.is_valid()
    if not formset.is_valid():
        return _render_review(request, formset, paste)
    ticked = [(index, form) for index, form in enumerate(formset.forms) if form.cleaned_data.get("keep")]
    if not ticked:
        return _render_review(request, formset, paste, problem="Tick at least one memory to save, or start over.")
    if not _within_import_rate(request, "import_saves"):
        response = _render_review(request, formset, paste, problem=TOO_MANY_IMPORTS)
        response.status_code = 429
        return response
    try:
        outcome = memories_import(user=request.user, proposals=[form.proposal() for _, form in ticked])
    except ImportInvalid as invalid:
        for place, errors in invalid.errors.items():
            _add_errors(ticked[place][1], errors)
        return _render_review(request, formset, paste, problem="Some of these cannot be saved as they are: see below.")
    except MemoryFull as full:
        return _render_review(request, formset, paste, problem=f"{full} Or untick some of these.")
    except LLMError:
        return _render_review(
            request,
            formset,
            paste,
            problem="Your memories could not be saved just now (the service that files them did not answer). "
            "Nothing was saved, and nothing you changed here is lost: save again in a moment.",
        )
    _say_what_happened(request, outcome)
    return redirect(reverse("memories") + "#memory-groups")


def _render_review(
    request: HtmxHttpRequest,
    formset: Any,
    paste: PasteForm,
    *,
    room: ImportRoom | None = None,
    problem: str = "",
    by_model: bool | None = None,
    from_prose: bool = False,
) -> HttpResponse:
    room = room or import_room_for_user(user=request.user)
    offered = sum(1 for form in formset.forms if not (_value(form, "known") or _value(form, "repeats")))
    context = {
        "formset": formset,
        "paste": paste,
        "problem": problem,
        "after": room.after(offered),
        "room": room,
        "by_model": by_model,
        "from_prose": from_prose,
        "forgotten_days": settings.MEMORY_FORGOTTEN_DAYS,
    }
    return render(request, "accounts/memory_import_review.html", context)


def _value(form: forms.Form, name: str) -> Any:
    return form.cleaned_data.get(name) if hasattr(form, "cleaned_data") else form.initial.get(name)


# validate_draft's words follow a field name; the form shows them under the field.
_SUBJECTS = {"summary": "This", "details": "The details", "tier": "The tier", "category": "The category"}


def _add_errors(form: ProposalForm, errors: dict[str, str]) -> None:
    for name, message in errors.items():
        subject = _SUBJECTS.get(name, "")
        text = f"{subject} {message}." if subject and not message[0].isupper() else message
        form.add_error(name if name in form.fields else None, text[0].upper() + text[1:])


def _say_what_happened(request: HtmxHttpRequest, outcome: ImportOutcome) -> None:
    count = len(outcome.saved)
    messages.success(
        request,
        f"Saved {count} {'memory' if count == 1 else 'memories'} from your import. "
        f"{'It is' if count == 1 else 'They are'} yours: your coach will not forget "
        f"{'it' if count == 1 else 'them'} on its own.",
    )
    if outcome.evicted:
        gone = len(outcome.evicted)
        messages.info(
            request,
            f"To make room, your coach forgot {gone} of its own oldest {'note' if gone == 1 else 'notes'}. "
            f"You can restore {'it' if gone == 1 else 'them'} under Recently forgotten for "
            f"{settings.MEMORY_FORGOTTEN_DAYS} days.",
        )
    room = outcome.room
    if room.kept > room.ceiling:
        messages.warning(
            request,
            f"You now have {room.kept} memories kept for good, more than the {room.ceiling} your coach holds. "
            "Until you delete some you no longer need, it cannot note anything new of its own.",
        )
