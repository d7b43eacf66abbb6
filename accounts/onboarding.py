"""The short, skippable form a person meets at first login. Each answer becomes a profile
memory with source `onboarding`, so it is protected: the coach can never evict it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from accounts.models import User
from coach import llm
from emails.services import email_time_zone_set
from memory.embeddings import memory_text
from memory.models import SUMMARY_MAX_CHARS
from memory.services import MemoryDraft, memory_save

INJURY_WORDS = re.compile(r"injur|hurt|pain|sprain|torn|broke|shoulder|knee|back|ankle|wrist|hip|elbow|neck")


@dataclass(frozen=True)
class Question:
    key: str
    label: str
    help: str
    category: str
    summary_prefix: str


QUESTIONS = (
    Question(
        "working-on",
        "What are you working on?",
        "Training for a race, a book, a career change...",
        "background",
        "Working on",
    ),
    Question("goals", "What would you like to get out of coaching?", "Your goals, big or small.", "goal", "Goals"),
    Question(
        "health",
        "Injuries, medical conditions or allergies your coach must know about",
        "For example: bad left shoulder, no overhead pressing; nut allergy.",
        "safety",
        "Health",
    ),
    Question(
        "schedule", "Your schedule", "When you can train or work on this, and when you can't.", "schedule", "Schedule"
    ),
    Question(
        "coaching-style",
        "How do you like to be coached?",
        "Blunt or gentle, short or detailed...",
        "feedback",
        "Coaching style",
    ),
)


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


def onboarding_complete(*, user: User, answers: dict[str, str], time_zone: str = "") -> int:
    """Remember each answer and mark onboarding done. Returns how many were remembered."""
    drafts = [_draft(question, answers[question.key]) for question in QUESTIONS if question.key in answers]
    # One embedding call for all answers, made before any transaction opens.
    embeddings = llm.embed([memory_text(summary=d.summary, content=d.content) for d in drafts])
    with transaction.atomic():
        for draft, embedding in zip(drafts, embeddings, strict=True):
            memory_save(user=user, draft=draft, source="onboarding", actor="user", embedding=embedding)
        User.objects.filter(pk=user.pk).update(onboarded_at=timezone.now())
    if time_zone:
        email_time_zone_set(user=user, time_zone=time_zone)
    return len(drafts)


def onboarding_skip(*, user: User) -> None:
    User.objects.filter(pk=user.pk).update(onboarded_at=timezone.now())


@login_required
@require_http_methods(["GET", "POST"])
def onboarding(request: HttpRequest) -> HttpResponse:
    if request.method == "POST" and "skip" in request.POST:
        onboarding_skip(user=request.user)
        return redirect("chat")
    form = OnboardingForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            onboarding_complete(
                user=request.user, answers=form.answers(), time_zone=form.cleaned_data.get("time_zone", "")
            )
        except llm.LLMError:
            form.add_error(None, "Your answers could not be saved just now; nothing is lost, please send them again.")
        else:
            return redirect("chat")
    return render(request, "accounts/onboarding.html", {"form": form})


def _draft(question: Question, answer: str) -> MemoryDraft:
    category = _health_category(answer) if question.key == "health" else question.category
    summary = f"{question.summary_prefix}: {' '.join(answer.split())}"
    if len(summary) > SUMMARY_MAX_CHARS:
        summary = summary[: SUMMARY_MAX_CHARS - 1].rsplit(" ", 1)[0] + "…"
    return MemoryDraft(key=question.key, tier="profile", category=category, summary=summary, content=answer)


def _health_category(answer: str) -> str:
    # Only for how the memory page labels it: all three are protected categories anyway.
    text = answer.lower()
    if "allerg" in text:
        return "allergy"
    if INJURY_WORDS.search(text):
        return "injury"
    return "medical"
