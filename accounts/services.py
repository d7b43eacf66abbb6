"""Writes the account pages make that belong to no other app: the first-login questions.

Memory writes (add, edit, delete, restore, delete all) are memory.services'; every way
to forget (a memory, all of them, a summary, a conversation, the account) is
accounts.forgetting's; email
preferences are emails.preferences' (they live beside the ledger the send task reads).
The onboarding answers become profile memories with source `onboarding`, one per fact
the person wrote (an injury and an allergy are two memories), so they are protected: the
coach can never evict them.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from accounts.models import User
from accounts.time_zones import canonical_zone
from emails.preferences import email_frequency_choose, nudges_reconsider
from infra import llm
from memory.drafts import MemoryDraft
from memory.embeddings import memory_text
from memory.models import SUMMARY_MAX_CHARS, Memory
from memory.overlaps import overlaps_offer
from memory.selectors import SimilarMemory
from memory.services import memory_add_by_user, memory_save

logger = logging.getLogger(__name__)

ALLERGY_WORDS = re.compile(r"allerg|intoleran|anaphyla", re.IGNORECASE)
INJURY_WORDS = re.compile(
    r"\b(?:injur\w*|hurt\w*|pain\w*|sore|sprain\w*|strain\w*|torn|tear|broke\w*|fractur\w*|surgery|"
    r"shoulders?|knees?|back|ankles?|wrists?|hips?|elbows?|necks?|hamstrings?|achilles|tendon\w*|ligament\w*|acl)\b",
    re.IGNORECASE,
)
# Most facts one answer may hold; more is a list to add on the memories page.
ONBOARDING_FACTS_MAX = 12
# Where one fact ends and the next begins: a new line or a semicolon, never a comma
# ("bad left shoulder, no overhead pressing" is one fact).
FACT_BREAK = re.compile(r"[\n;]+|\s[\u2022\u00b7]\s")
# A list marker the person typed: "- ", "* ", "• ", "1. ", "2) ".
LIST_MARKER = re.compile(r"^\s*(?:[-*\u2022\u00b7\u2013\u2014]+|\(?\d{1,2}[.)])\s+")
# A label the person typed before a fact: a few words and a colon ("goal: ...").
TYPED_LABEL = re.compile(r"^\s*(?P<label>[^\W\d][\w '\u2019-]{0,30}?)\s*[:\uff1a]\s*(?P<rest>\S.*)$", re.DOTALL)


@dataclass(frozen=True)
class Question:
    """One first-login question, and how its answer is filed: the category of each fact,
    the words a summary starts with where the fact alone would be unclear ("Coaching
    style: blunt"), and the labels a person may type that say no more than the question
    ("goal: run a half marathon"), which are dropped rather than doubled."""

    key: str
    label: str
    help: str
    category: str
    summary_prefix: str = ""
    typed_labels: frozenset[str] = frozenset()


QUESTIONS = (
    Question(
        "working-on",
        "What are you working on?",
        "Training for a race, a book, a career change...",
        "background",
        summary_prefix="Working on",
        typed_labels=frozenset({"working on", "project", "projects", "i am working on", "i'm working on"}),
    ),
    Question(
        "goals",
        "What would you like to get out of coaching?",
        "Your goals, big or small; one a line.",
        "goal",
        typed_labels=frozenset({"goal", "goals", "my goal", "my goals", "aim", "aims", "objective", "objectives"}),
    ),
    Question(
        "health",
        "Injuries, medical conditions or allergies your coach must know about",
        "One a line, or separated by semicolons. For example: bad left shoulder, no overhead pressing; nut allergy.",
        "medical",
        typed_labels=frozenset(
            {"health", "injury", "injuries", "medical", "condition", "conditions", "medical condition"}
        ),
    ),
    Question(
        "schedule",
        "Your schedule",
        "When you can train or work on this, and when you can't.",
        "schedule",
        typed_labels=frozenset({"schedule", "my schedule", "availability", "when"}),
    ),
    Question(
        "coaching-style",
        "How do you like to be coached?",
        "Blunt or gentle, short or detailed...",
        "feedback",
        summary_prefix="Coaching style",
        typed_labels=frozenset({"coaching style", "style", "my style", "coaching"}),
    ),
)
# A typed allergy label says something the fact needs: "allergies: peanuts" reads
# "Allergic to peanuts".
ALLERGY_LABELS = frozenset({"allergy", "allergies", "allergic", "allergic to", "food allergy", "food allergies"})


def memory_add_by_person(*, user: User, draft: MemoryDraft) -> tuple[Memory, list[SimilarMemory]]:
    """A memory the person typed on the memory page, kept for good; and the memories it
    reads like, offered there to merge or keep both (never a reason not to save it)."""
    memory = memory_add_by_user(user=user, draft=draft)
    return memory, overlaps_offer(user=user, memory=memory)


class OnboardingDone(Exception):
    """The person answered (or skipped) the first-login questions already: they are taken once."""


def onboarding_complete(*, user: User, answers: dict[str, str], time_zone: str = "", email_frequency: str = "") -> int:
    """Remember each fact of each answer as its own memory, keep the settings given, and
    mark onboarding done. Returns how many memories were made. OnboardingDone, with
    nothing saved, once it is done: each post would otherwise add up to 60 protected
    memories, which the ceiling never refuses the person.

    The settings are kept first: they need no model, so they stand even when the
    memories cannot be saved just now (the person sends the answers again)."""
    if _onboarded(user, locked=False):
        raise OnboardingDone
    onboarding_settings_keep(user=user, time_zone=time_zone, email_frequency=email_frequency)
    drafts = [
        draft for question in QUESTIONS if question.key in answers for draft in _drafts(question, answers[question.key])
    ]
    # One embedding call for all facts, made before any transaction opens.
    embeddings = llm.embed([memory_text(summary=d.summary, content=d.content) for d in drafts])
    with transaction.atomic():
        # Asked again with the person's row locked: two posts at once save one set.
        if _onboarded(user, locked=True):
            raise OnboardingDone
        for draft, embedding in zip(drafts, embeddings, strict=True):
            memory_save(user=user, draft=draft, source="onboarding", actor="user", embedding=embedding)
        User.objects.filter(pk=user.pk).update(onboarded_at=timezone.now())
    return len(drafts)


def _onboarded(user: User, *, locked: bool) -> bool:
    people = User.objects.select_for_update() if locked else User.objects.all()
    return people.filter(pk=user.pk, onboarded_at__isnull=False).exists()


def onboarding_skip(*, user: User, time_zone: str = "", email_frequency: str = "") -> None:
    """Let the person in without answering: nothing is remembered of the answers, but the
    zone their browser gave and an email choice they made are kept."""
    onboarding_settings_keep(user=user, time_zone=time_zone, email_frequency=email_frequency)
    User.objects.filter(pk=user.pk).update(onboarded_at=timezone.now())


def onboarding_settings_keep(*, user: User, time_zone: str = "", email_frequency: str = "") -> None:
    """The time zone and email frequency of the onboarding form, each where given."""
    if time_zone:
        user_time_zone_set(user=user, time_zone=time_zone)
    if email_frequency:
        email_frequency_choose(user=user, frequency=email_frequency)


def user_time_zone_set(*, user: User, time_zone: str) -> bool:
    """Read the person's clock in `time_zone` from now on (dates shown, quiet hours, the
    morning of a date); an alias is kept as the place it stands for. Ignored, returning
    False, unless it is a real zone name."""
    zone = canonical_zone(time_zone)
    if zone is None:
        return False
    User.objects.filter(pk=user.pk).update(time_zone=zone)
    user.time_zone = zone
    nudges_reconsider(user=user)
    return True


def answer_facts(answer: str) -> list[str]:
    """The separate facts of one answer: one a line, bullet or semicolon (never split at a
    comma, which usually joins the parts of one fact), list markers dropped."""
    facts = (LIST_MARKER.sub("", part).strip(" \t.,") for part in FACT_BREAK.split(answer))
    return [" ".join(fact.split()) for fact in facts if fact]


def _drafts(question: Question, answer: str) -> list[MemoryDraft]:
    drafts = []
    for number, fact in enumerate(answer_facts(answer), start=1):
        category = _health_category(fact) if question.key == "health" else question.category
        summary = _summary(question, fact)
        content = fact if len(summary) > SUMMARY_MAX_CHARS else ""
        if len(summary) > SUMMARY_MAX_CHARS:
            summary = summary[: SUMMARY_MAX_CHARS - 1].rsplit(" ", 1)[0] + "…"
        drafts.append(
            MemoryDraft(
                key=f"onboarding-{question.key}-{number}",
                tier="profile",
                category=category,
                summary=summary,
                content=content,
            )
        )
    return drafts


def _summary(question: Question, fact: str) -> str:
    """How the fact reads in the index and on the memory page: the person's words, with
    a label they typed that only repeats the question dropped, and a few words before it
    where the fact alone would not say what it is about."""
    if match := TYPED_LABEL.match(fact):
        label = " ".join(match["label"].lower().replace("\u2019", "'").split())
        if label in ALLERGY_LABELS and question.key == "health":
            rest = match["rest"]
            fact = rest if ALLERGY_WORDS.match(rest) else f"allergic to {rest}"
        elif label in question.typed_labels or label == question.summary_prefix.lower():
            fact = match["rest"]
    if question.summary_prefix:
        return f"{question.summary_prefix}: {fact}"
    return fact[:1].upper() + fact[1:]


def _health_category(fact: str) -> str:
    # All three are protected categories; the category says what kind of fact it is, to
    # the person on the memory page and to the model in the index.
    if ALLERGY_WORDS.search(fact):
        return "allergy"
    if INJURY_WORDS.search(fact):
        return "injury"
    return "medical"
