"""Forms of the memory page and the account page.

They parse and give inline messages; the rules a memory must follow live in
memory.services.validate_draft, whose errors the views put back on these forms.
"""

from __future__ import annotations

from datetime import datetime, time
from functools import cache
from typing import Any
from zoneinfo import ZoneInfo, available_timezones

from django import forms
from django.conf import settings

from accounts.pages import COMMUNICATION, COMMUNICATION_LABEL
from accounts.services import QUESTIONS
from emails.models import EmailPreference
from memory.drafts import MemoryDraft
from memory.models import SUMMARY_MAX_CHARS, Category, ProspectiveStatus, Tier

# A due date is a day; the coach raises it in the morning of that day.
DUE_TIME = time(9, 0)


class MemoryForm(forms.Form):
    """A memory as the person writes it: added ("always remember this") or edited."""

    summary = forms.CharField(
        label="What your coach should remember",
        max_length=SUMMARY_MAX_CHARS,
        error_messages={
            "required": "Write what your coach should remember.",
            "max_length": "Keep this to %(limit_value)d characters (it has %(show_value)d); put more in the details.",
        },
    )
    tier = forms.ChoiceField(
        label="Tier",
        choices=[
            (Tier.PROFILE, "Profile: who you are"),
            (Tier.EPISODIC, "Episodic: a note from a session"),
            (Tier.PROSPECTIVE, "Prospective: something to bring up later"),
        ],
        initial=Tier.PROFILE,
        error_messages={"invalid_choice": "Choose profile, episodic or prospective."},
    )
    category = forms.ChoiceField(
        label="Category",
        choices=Category.choices,
        initial=Category.OTHER,
        error_messages={"invalid_choice": "“%(value)s” is not a category; choose one from the list."},
    )
    due_date = forms.DateField(
        label="Bring it up on",
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="Leave it empty and your coach brings it up at your next conversation.",
        error_messages={"invalid": "Give a date, for example 2026-06-01."},
    )
    status = forms.ChoiceField(
        label="Status",
        choices=ProspectiveStatus.choices,
        required=False,
        error_messages={"invalid_choice": "Choose open, raised, done or dismissed."},
    )

    def __init__(
        self, *args: Any, current_due_at: datetime | None = None, time_zone: str = "UTC", **kwargs: Any
    ) -> None:
        kwargs.setdefault("auto_id", "add-%s")
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)
        self.current_due_at = current_due_at
        # The date is the person's: its morning on their own clock.
        self.zone = ZoneInfo(time_zone)
        # Built here, not on the class, so the limit follows the setting at request time.
        limit = settings.MEMORY_CONTENT_MAX_CHARS
        self.fields["content"] = forms.CharField(
            label="Details",
            required=False,
            max_length=limit,
            widget=forms.Textarea(attrs={"rows": 3}),
            help_text="Optional: the longer note behind the one line above.",
            error_messages={"max_length": "Keep the details to %(limit_value)d characters; they have %(show_value)d."},
        )
        self.order_fields(["summary", "content"])
        # No maxlength attribute: a browser would cut a paste short without a word, while
        # the server's message says what is too long and keeps every character typed.
        for name, most in (("summary", SUMMARY_MAX_CHARS), ("content", limit)):
            self.fields[name].widget.attrs.pop("maxlength", None)
            self.fields[name].widget.attrs["data-limit"] = most

    def draft(self) -> MemoryDraft:
        """The form as a draft; the key is the service's to give (neutral, never typed)."""
        data = self.cleaned_data
        due_at = None
        if data["tier"] == Tier.PROSPECTIVE and data.get("due_date"):
            due_at = self._due_at(data["due_date"])
        return MemoryDraft(
            key="",
            tier=data["tier"],
            category=data["category"],
            summary=data["summary"],
            content=data["content"],
            due_at=due_at,
            status=data.get("status") or "",
        )

    def _due_at(self, day: Any) -> datetime:
        # An unchanged date keeps the exact time the memory had.
        if self.current_due_at is not None and self.current_due_at.astimezone(self.zone).date() == day:
            return self.current_due_at
        return datetime.combine(day, DUE_TIME, tzinfo=self.zone)

    @classmethod
    def initial_for(cls, memory: Any, *, time_zone: str = "UTC") -> dict[str, Any]:
        return {
            "summary": memory.summary,
            "content": "" if memory.content.strip() == memory.summary.strip() else memory.content,
            "tier": memory.tier,
            "category": memory.category,
            "due_date": memory.due_at.astimezone(ZoneInfo(time_zone)).date() if memory.due_at else None,
            "status": memory.status,
        }


class MemoryEditForm(MemoryForm):
    # The version the person started from: a change made meanwhile is not overwritten.
    version = forms.IntegerField(widget=forms.HiddenInput, required=False, min_value=0)

    def __init__(self, *args: Any, memory_id: int, **kwargs: Any) -> None:
        # Several memories can be open for editing on one page: their ids must differ.
        super().__init__(*args, auto_id=f"edit-{memory_id}-%s", **kwargs)


class MemoryFilterForm(forms.Form):
    q = forms.CharField(label="Search", required=False, max_length=200)
    tier = forms.ChoiceField(
        label="Tier",
        required=False,
        choices=[("", "All tiers"), *Tier.choices, (COMMUNICATION, COMMUNICATION_LABEL)],
    )
    category = forms.ChoiceField(label="Category", required=False, choices=[("", "All categories"), *Category.choices])

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["q"].widget.attrs.update({"type": "search", "placeholder": "Search your memories"})

    def value(self, name: str) -> str:
        # An unknown filter value is dropped (that filter shows everything), not an error page.
        self.is_valid()
        return self.cleaned_data.get(name) or ""


@cache
def time_zone_choices() -> list[tuple[str, str]]:
    return [(name, name.replace("_", " ")) for name in sorted(available_timezones())]


class EmailPreferenceForm(forms.ModelForm):
    """The email preferences, and the person's time zone, which quiet hours are read in (it
    is the person's own, on their account, and every date they are shown follows it)."""

    time_zone = forms.ChoiceField(
        label="Time zone",
        choices=time_zone_choices,
        error_messages={"invalid_choice": "“%(value)s” is not a time zone we know; choose one from the list."},
    )

    class Meta:
        model = EmailPreference
        fields = ["frequency", "session_summaries", "quiet_start", "quiet_end"]
        labels = {
            "frequency": "How often your coach may write",
            "session_summaries": "Send me a short recap after each session",
            "quiet_start": "Quiet from",
            "quiet_end": "until",
        }
        widgets = {
            "frequency": forms.RadioSelect,
            "quiet_start": forms.TimeInput(attrs={"type": "time"}, format="%H:%M"),
            "quiet_end": forms.TimeInput(attrs={"type": "time"}, format="%H:%M"),
        }
        help_texts = {
            "session_summaries": "",
            "quiet_start": "",
            "quiet_end": "",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)
        self.fields["time_zone"].initial = self.instance.user.time_zone

    def preferences(self) -> dict[str, Any]:
        """The cleaned email preferences, without the time zone."""
        return {name: self.cleaned_data[name] for name in self.Meta.fields}

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        start, end = cleaned.get("quiet_start"), cleaned.get("quiet_end")
        if start is not None and end is not None and start == end:
            self.add_error("quiet_end", "Quiet hours need an end different from their start.")
        return cleaned


class OnboardingForm(forms.Form):
    time_zone = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        for question in QUESTIONS:
            self.fields[question.key] = forms.CharField(
                label=question.label,
                help_text=question.help,
                required=False,
                max_length=settings.MEMORY_CONTENT_MAX_CHARS,
                widget=forms.Textarea(attrs={"rows": 2}),
            )

    def answers(self) -> dict[str, str]:
        return {q.key: self.cleaned_data[q.key].strip() for q in QUESTIONS if self.cleaned_data.get(q.key, "").strip()}
