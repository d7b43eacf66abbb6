"""Forms of the memory page and the account page.

They parse and give inline messages; the rules a memory must follow live in
memory.services.validate_draft, whose errors the views put back on these forms.
"""

from __future__ import annotations

from datetime import datetime, time
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from django import forms
from django.conf import settings
from django.forms.utils import flatatt
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from accounts.pages import COMMUNICATION, COMMUNICATION_LABEL, TIER_LABELS
from accounts.services import ONBOARDING_FACTS_MAX, QUESTIONS, answer_facts
from accounts.time_zones import canonical_zone, zone_choices
from emails.models import EmailPreference
from memory.corrections import OldDetails
from memory.drafts import MemoryDraft
from memory.models import SUMMARY_MAX_CHARS, Category, ProspectiveStatus, Tier

if TYPE_CHECKING:
    from django.forms import ModelForm
else:
    # Generic in its model in django-stubs alone.
    class ModelForm[M](forms.ModelForm):
        pass


# A due date is a day; the coach raises it in the morning of that day.
DUE_TIME = time(9, 0)


# What a person may file a memory under: a weekly summary is the app's to write.
WRITABLE_CATEGORIES = [(value, label) for value, label in Category.choices if value != Category.EPISODE]


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
            (Tier.PROFILE, f"{TIER_LABELS[Tier.PROFILE]}: who you are"),
            (Tier.EPISODIC, f"{TIER_LABELS[Tier.EPISODIC]}: a note from a session"),
            (Tier.PROSPECTIVE, f"{TIER_LABELS[Tier.PROSPECTIVE]}: something to bring up later"),
        ],
        initial=Tier.PROFILE,
        error_messages={"invalid_choice": "Choose about you, from your conversations, or coming up."},
    )
    # Left to the words by default, by the rules the import files pasted facts by (safety
    # topics first): "Allergic to peanuts" added without a choice is filed under Allergy.
    category = forms.ChoiceField(
        label="Category",
        choices=[("", "From what you wrote"), *WRITABLE_CATEGORIES],
        initial="",
        required=False,
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
    # The person's answer when their new line sat over details that said the old one: set
    # by the button they press, so no answer (the first save) means "ask me".
    old_details = forms.ChoiceField(
        choices=[(OldDetails.KEEP, "keep"), (OldDetails.DROP, "drop")], required=False, widget=forms.HiddenInput
    )

    def old_details_answer(self) -> OldDetails:
        return OldDetails(self.cleaned_data.get("old_details") or OldDetails.ASK)

    def __init__(self, *args: Any, memory_id: int, current_category: str = "", **kwargs: Any) -> None:
        # Several memories can be open for editing on one page: their ids must differ.
        super().__init__(*args, auto_id=f"edit-{memory_id}-%s", **kwargs)
        # A memory being edited has its category: the person changes it, or leaves it. A
        # weekly summary may stay one; nothing else becomes one (memory.drafts).
        category = self.fields["category"]
        assert isinstance(category, forms.ChoiceField), "the memory form's category is a choice"
        category.choices = Category.choices if current_category == Category.EPISODE else WRITABLE_CATEGORIES
        category.required = True


class MemoryFilterForm(forms.Form):
    q = forms.CharField(label="Search", required=False, max_length=200)
    tier = forms.ChoiceField(
        label="Tier",
        required=False,
        choices=[("", "All tiers"), *TIER_LABELS.items(), (COMMUNICATION, COMMUNICATION_LABEL)],
    )
    category = forms.ChoiceField(label="Category", required=False, choices=[("", "All categories"), *Category.choices])

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["q"].widget.attrs.update({"type": "search", "placeholder": "Search your memories"})

    def value(self, name: str) -> str:
        # An unknown filter value is dropped (that filter shows everything), not an error page.
        self.is_valid()
        return self.cleaned_data.get(name) or ""


class TimeZoneSelect(forms.Select):
    """The zone menu, written compactly: 420 places with Django's option template (a line
    and its indentation each) would be most of the page they are on. An option's end tag
    may be left out before the next option or group (HTML's own rule): the DOM is the same."""

    def render(self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None) -> SafeString:
        context = self.get_context(name, value, attrs)["widget"]
        groups = []
        for group, options, _ in context["optgroups"]:
            html = format_html_join(
                "",
                '<option value="{}"{}>{}',
                ((o["value"], mark_safe(" selected") if o["selected"] else "", o["label"]) for o in options),
            )
            groups.append(format_html('<optgroup label="{}">{}</optgroup>', group, html) if group else html)
        options = format_html_join("", "{}", ((group,) for group in groups))
        return format_html("<select{}>{}</select>", flatatt({"name": name, **context["attrs"]}), options)


class TimeZoneField(forms.ChoiceField):
    """A zone picked from places grouped by region (accounts.time_zones). Any real zone
    name is taken, an alias as the place it stands for; `lenient` drops a name that is no
    zone instead of refusing the form (a browser's guess must not stand in anyone's way)."""

    widget = TimeZoneSelect(attrs={"data-time-zone-picker": ""})

    def __init__(self, *, lenient: bool = False, **kwargs: Any) -> None:
        kwargs.setdefault("choices", zone_choices)
        kwargs.setdefault(
            "error_messages", {"invalid_choice": "“%(value)s” is not a time zone we know; choose one from the list."}
        )
        super().__init__(**kwargs)
        self.lenient = lenient

    def to_python(self, value: Any) -> str:
        name = super().to_python(value)
        if not name:
            return ""
        zone = canonical_zone(name)
        if zone is None:
            return "" if self.lenient else name
        return zone

    def valid_value(self, value: Any) -> bool:
        return canonical_zone(str(value)) is not None


def _zone_field(form: forms.BaseForm) -> TimeZoneField:
    field = form.fields["time_zone"]
    assert isinstance(field, TimeZoneField)  # as the form declares it
    return field


class EmailPreferenceForm(ModelForm[EmailPreference]):
    """The email preferences, and the person's time zone, which quiet hours are read in (it
    is the person's own, on their account, and every date they are shown follows it)."""

    time_zone = TimeZoneField(
        label="Time zone",
        help_text="Type a city, country or region to find yours. Every date and time you see is in this zone.",
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
        error_messages = {
            "frequency": {"required": "Choose how often your coach may write, or “No emails”."},
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
        zone = self.instance.user.time_zone
        self.fields["time_zone"].initial = zone
        # The person's own zone is offered even if the list has no place for it.
        _zone_field(self).choices = zone_choices(current=zone)

    def preferences(self) -> dict[str, Any]:
        """The cleaned email preferences, without the time zone."""
        return {name: self.cleaned_data[name] for name in self.Meta.fields}

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        start, end = cleaned.get("quiet_start"), cleaned.get("quiet_end")
        if start is not None and end is not None and start == end:
            self.add_error("quiet_end", "Quiet hours need an end different from their start.")
        return cleaned


class OnboardingForm(forms.Form):
    """The first-login questions, each optional, and the two settings that matter from the
    start: the person's time zone (the browser's, as found by static/js/onboarding.js) and
    how often the coach may email them (nothing until they choose)."""

    time_zone = TimeZoneField(
        label="Your time zone",
        help_text="Found from this device; change it if it is wrong. Type a city or country to find yours.",
        required=False,
        lenient=True,
    )
    email_frequency = forms.ChoiceField(
        label="May your coach email you between sessions?",
        help_text="A short note now and then: a nudge, or a check-in before something you planned. "
        "Nothing is sent until you choose, and you can change it on your account page.",
        choices=EmailPreference.Frequency.choices,
        required=False,
        widget=forms.RadioSelect,
        error_messages={"invalid_choice": "Choose once a week, twice a week or no emails."},
    )

    def __init__(self, *args: Any, time_zone: str = "UTC", **kwargs: Any) -> None:
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)
        self.fields["time_zone"].initial = time_zone
        _zone_field(self).choices = zone_choices(current=time_zone)
        for question in QUESTIONS:
            self.fields[question.key] = forms.CharField(
                label=question.label,
                help_text=question.help,
                required=False,
                max_length=settings.MEMORY_CONTENT_MAX_CHARS,
                widget=forms.Textarea(attrs={"rows": 2}),
            )
            # No maxlength attribute: a browser would cut a paste short without a word; the
            # server's message says what is too long and the form keeps every character.
            self.fields[question.key].widget.attrs.pop("maxlength", None)

    def question_fields(self) -> list[forms.BoundField]:
        return [self[question.key] for question in QUESTIONS]

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        for question in QUESTIONS:
            facts = answer_facts(cleaned.get(question.key) or "")
            if len(facts) > ONBOARDING_FACTS_MAX:
                self.add_error(
                    question.key,
                    f"That is {len(facts)} separate things; keep it to {ONBOARDING_FACTS_MAX} here "
                    "and add the rest on your memories page once you have started.",
                )
        return cleaned

    def answers(self) -> dict[str, str]:
        return {q.key: self.cleaned_data[q.key].strip() for q in QUESTIONS if self.cleaned_data.get(q.key, "").strip()}

    def settings_chosen(self) -> dict[str, str]:
        """The time zone and email frequency given, each "" when not given (or not usable)."""
        data = getattr(self, "cleaned_data", {})
        return {"time_zone": data.get("time_zone") or "", "email_frequency": data.get("email_frequency") or ""}
