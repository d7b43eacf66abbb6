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
from memory.imports.review import (
    IMPORT_MAX_FACTS,
    ImportSplit,
    import_leftovers,
    import_room_for_user,
    import_split,
)
from memory.imports.saving import ImportInvalid, ImportOutcome, memories_import
from memory.imports.splitting import (
    IMPORT_CATEGORIES,
    IMPORT_MAX_CHARS,
    ImportRefused,
    Mark,
    Proposal,
    import_text_clean,
)
from memory.models import SUMMARY_MAX_CHARS, Category, ImportedFrom, Memory, Tier
from memory.selectors import memory_list_for_user

SUMMARY_LABEL = "What your coach should remember"
# What a proposal that differs from a kept memory may say of the two (paste_splitter.differences).
DIFFERENCES = ("the month", "the days", "the time", "your work", "where you live")
KEPT_STANDS, NEW_STANDS, BOTH_STAND = "kept", "new", "both"
STANDS = [
    (KEPT_STANDS, "What you keep now"),
    (NEW_STANDS, "This, in its place"),
    (BOTH_STAND, "Both: they are different things"),
]
TOO_MANY_IMPORTS = (
    "You have imported a lot in the last hour. Wait a while, then try again: nothing you pasted was sent or saved."
)
HOUR_SECONDS = 3600


def _within_import_rate(request: HtmxHttpRequest, name: str) -> bool:
    # Each split asks the model, each save embeds in bulk: counted per person, per hour.
    return within_rate(request.user.pk, name, limit=settings.MEMORY_IMPORTS_PER_HOUR, window_seconds=HOUR_SECONDS)


class PasteForm(forms.Form):
    # Which assistant it came from: what the imported memories are labelled with.
    source = forms.ChoiceField(
        label="Which assistant is it from?",
        choices=ImportedFrom.choices,
        initial=ImportedFrom.CHATGPT,
        # Left out (an old page, a script): the memories say "another assistant".
        required=False,
        error_messages={"invalid_choice": "Choose the assistant from the list."},
    )
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
    # What it is beside the person's memories and the rest of the paste (memory.imports.
    # review), carried as the review showed it: the memory it reads like or says otherwise
    # than (only ever looked up among the person's own), or the earlier proposal.
    mark = forms.ChoiceField(choices=[(m.value, m.name) for m in Mark], required=False, widget=forms.HiddenInput)
    kept = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)
    kept_version = forms.IntegerField(required=False, min_value=0, widget=forms.HiddenInput)
    earlier = forms.IntegerField(required=False, min_value=0, max_value=IMPORT_MAX_FACTS, widget=forms.HiddenInput)
    differs_in = forms.ChoiceField(
        choices=[(d, d) for d in ("", *DIFFERENCES)], required=False, widget=forms.HiddenInput
    )
    # For one that differs from what is kept: which of the two stands.
    stands = forms.ChoiceField(
        label="Which stands?",
        choices=STANDS,
        initial=KEPT_STANDS,
        required=False,
        widget=forms.RadioSelect,
        error_messages={"invalid_choice": "Choose which of the two stands."},
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)
        # No maxlength (a browser would cut a paste short): the counter and the save say it.
        self.fields["summary"].widget.attrs["data-limit"] = SUMMARY_MAX_CHARS
        self.fields["details"].widget.attrs["data-limit"] = settings.MEMORY_CONTENT_MAX_CHARS

    @property
    def marked(self) -> str:
        """The mark, as sent or as first offered."""
        value = self.cleaned_data.get("mark") if hasattr(self, "cleaned_data") else self.initial.get("mark")
        return str(value or "")

    def chosen(self) -> bool:
        """Whether the person chose to save it: ticked, or (when it differs from what they
        keep) chosen to stand in its place or beside it."""
        data = self.cleaned_data
        if data.get("mark") == Mark.DIFFERS and data.get("kept"):
            return data.get("stands") in (NEW_STANDS, BOTH_STAND)
        return bool(data.get("keep"))

    def proposal(self) -> Proposal:
        data = self.cleaned_data
        differs = data.get("mark") == Mark.DIFFERS
        return Proposal(
            summary=data["summary"],
            details=data["details"],
            category=data["category"],
            tier=data["tier"],
            kept=data.get("kept"),
            kept_version=data.get("kept_version"),
            replaces=differs and data.get("stands") == NEW_STANDS,
        )


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
            formset = ProposalFormSet(initial=[_initial(p) for p in split.proposals], prefix=PREFIX)
            return _render_review(request, formset, form, split=split)
    return render(request, "accounts/memory_import.html", {"form": form})


def _initial(proposal: Proposal) -> dict[str, object]:
    return {
        "keep": proposal.offered_ticked,
        "summary": proposal.summary,
        "details": proposal.details,
        "category": proposal.category,
        "tier": proposal.tier,
        "mark": proposal.mark.value,
        "kept": proposal.kept,
        "kept_version": proposal.kept_version,
        "earlier": proposal.earlier,
        "differs_in": proposal.differs_in,
        "stands": KEPT_STANDS,
    }


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
    ticked = [(index, form) for index, form in enumerate(formset.forms) if form.chosen()]
    if not ticked:
        return _render_review(request, formset, paste, problem="Tick at least one memory to save, or start over.")
    if not _within_import_rate(request, "import_saves"):
        response = _render_review(request, formset, paste, problem=TOO_MANY_IMPORTS)
        response.status_code = 429
        return response
    try:
        outcome = memories_import(
            user=request.user,
            proposals=[form.proposal() for _, form in ticked],
            imported_from=paste.cleaned_data.get("source") or ImportedFrom.ANOTHER,
        )
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
    split: ImportSplit | None = None,
    problem: str = "",
) -> HttpResponse:
    room = split.room if split else import_room_for_user(user=request.user)
    if split is not None:
        skipped, unread_from_line = split.skipped, split.unread_from_line
    else:
        # Said again after a save that could not be made: the paste tells which lines.
        skipped, unread_from_line = import_leftovers(paste.cleaned_data.get("text", "") if paste.is_valid() else "")
    offered = sum(1 for form in formset.forms if form.marked not in (Mark.KNOWN, Mark.REPEATS))
    context = {
        "formset": formset,
        "paste": paste,
        "problem": problem,
        "after": room.after(offered),
        "room": room,
        "by_model": split.by_model if split else None,
        "from_prose": split.from_prose if split else False,
        "skipped": skipped,
        "unread_from_line": unread_from_line,
        "rows": _beside_kept(request, formset),
        "forgotten_days": settings.MEMORY_FORGOTTEN_DAYS,
        "max_facts": IMPORT_MAX_FACTS,
    }
    return render(request, "accounts/memory_import_review.html", context)


def _beside_kept(request: HtmxHttpRequest, formset: Any) -> list[tuple[ProposalForm, Memory | None]]:
    """Each proposal's form with the person's memory it is shown beside, if any: only ever
    one of theirs (an id in the form that is not theirs, or is gone, shows none)."""
    ids = [_kept_id(form) for form in formset.forms]
    kept = {m.pk: m for m in memory_list_for_user(user=request.user).filter(pk__in=[i for i in ids if i])}
    return [(form, kept.get(kept_id) if kept_id else None) for form, kept_id in zip(formset.forms, ids, strict=True)]


def _kept_id(form: ProposalForm) -> int | None:
    value = str(_value(form, "kept") or "")
    return int(value) if value.isdigit() else None


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
    replaced = len(outcome.replaced)
    in_place = (
        f" {replaced} of them took the place of {'a memory' if replaced == 1 else 'memories'} you had, "
        "as you chose; the earlier words are in each one's history."
        if replaced
        else ""
    )
    messages.success(
        request,
        f"Saved {count} {'memory' if count == 1 else 'memories'} from your import. "
        f"{'It is' if count == 1 else 'They are'} yours: your coach will not forget "
        f"{'it' if count == 1 else 'them'} on its own.{in_place}",
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
