"""Writes the account pages make that belong to no other app: the first-login questions,
and erasing the account.

Memory writes (add, edit, delete, restore, delete all) are memory.services'; email
preferences are emails.preferences' (they live beside the ledger the send task reads).
The onboarding answers become profile memories with source `onboarding`, so they are
protected: the coach can never evict them.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit
from zoneinfo import available_timezones

import redis
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import User
from emails.outbox import mail_forget
from infra import llm
from infra.cache import cache_delete_matching
from memory.drafts import MemoryDraft
from memory.embeddings import memory_text
from memory.models import SUMMARY_MAX_CHARS
from memory.services import memory_save

logger = logging.getLogger(__name__)

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


def account_delete(*, user: User, hosts: Iterable[str] = ()) -> None:
    """Erase the person and every row about them, and what the cache counted of them.

    Memories, their events and proposals, chat sessions and messages, emails, email
    preferences and login sessions cascade in the database itself; allauth's rows (email
    addresses and their confirmations) and the admin log cascade in Django's collector.
    One transaction: either all of it goes or none of it does. Then, outside it, the
    rate-limit counters kept under their id, their address, or "host:address" for each of
    `hosts` (the host names they may have signed in at) are deleted from the cache.
    """
    email = user.email.lower()
    addresses = {email, *(address.lower() for address in user.emailaddress_set.values_list("email", flat=True))}
    with transaction.atomic():
        User.objects.filter(pk=user.pk).delete()
        for address in addresses:
            mail_forget(address)
    sources = [
        email,
        *(f"{host}:{email}" for host in {*hosts, *settings.ALLOWED_HOSTS, urlsplit(settings.SITE_URL).netloc}),
    ]
    digests = [hashlib.sha256(source.encode()).hexdigest() for source in sources]
    try:
        cache_delete_matching([f"allauth:rl:*:user:{user.pk}", *(f"allauth:rl:*:{digest}" for digest in digests)])
    except redis.RedisError as error:
        # The person is erased; these counters of theirs expire within minutes on their own.
        logger.warning("rate-limit counters of an erased account could not be deleted now: %s", error)


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
        user_time_zone_set(user=user, time_zone=time_zone)
    return len(drafts)


def user_time_zone_set(*, user: User, time_zone: str) -> bool:
    """Read the person's clock in `time_zone` from now on (dates shown, quiet hours, the
    morning of a date). Ignored, returning False, unless it is a real zone name."""
    if time_zone not in available_timezones():
        return False
    User.objects.filter(pk=user.pk).update(time_zone=time_zone)
    user.time_zone = time_zone
    return True


def onboarding_skip(*, user: User) -> None:
    User.objects.filter(pk=user.pk).update(onboarded_at=timezone.now())


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
