"""What the model is asked for an email, and what becomes of its answer.

The model drafts with what the chat coach knows of the person (the memory block: profile,
intentions coming up, weekly episodes, the emails sent lately) and, for each of the last
emails, a `Previous email:` line, so no two read alike. A draft too like any email the
person was ever sent (cosine similarity of embeddings above EMAIL_REPEAT_THRESHOLD) is
redrafted once, with the offending draft named; a second near-copy is not sent at all.
Nobody reads a reply to an email: a sentence asking for one is taken out of the draft, and
every email links to the chat, where the coach does read what the person says.

Model calls happen here and nowhere near a transaction: the caller saves the result.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

from django.conf import settings
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.text import Truncator

from coach.conversation import today_line
from emails.links import addresses_off_site_as_hosts
from emails.models import Email, EmailPreference, opening_line
from emails.reply_asks import without_reply_asks
from emails.selectors import (
    email_closest_sent,
    email_preference_for_user,
    emails_recently_sent,
    sent_emails_for_prompt,
)
from emails.unsubscribe import preferences_url, unsubscribe_url
from infra import llm
from infra.llm import Embedding
from infra.prompts import prompt
from memory.context import assemble_memory_context

SUBJECT_MAX_CHARS = 120
HOW_OFTEN: dict[str, str] = {
    EmailPreference.Frequency.WEEKLY: "about once a week between sessions",
    EmailPreference.Frequency.TWICE_WEEKLY: "about twice a week between sessions",
}
SUBJECT_LINE = re.compile(r"^[\s*#_]*subject\s*:[\s*_]*(?P<subject>.*?)[\s*_]*$", re.IGNORECASE)
# Used when the model forgets the `Subject:` line; the body is still its own.
FALLBACK_SUBJECTS: dict[str, str] = {
    Email.Kind.NUDGE: "A note from your coach",
    Email.Kind.CHECK_IN: "How is it going?",
    Email.Kind.SESSION_SUMMARY: "Your session, in short",
}


@dataclass(frozen=True)
class Draft:
    """What the model wrote: a subject and a plain-text body, without our footer."""

    subject: str
    body: str

    @property
    def text(self) -> str:
        """What is compared with earlier emails: the model's own words, not the footer
        every email shares."""
        return f"{self.subject}\n\n{self.body}"

    @property
    def opening(self) -> str:
        return opening_line(self.body)


@dataclass(frozen=True)
class WrittenEmail:
    """A draft that reads unlike the last emails, rendered for sending."""

    subject: str
    body_text: str
    body_html: str
    embedding: Embedding


@dataclass(frozen=True)
class RepetitiveDraft:
    """The redraft still read like an earlier email: it is recorded, not sent."""

    draft: Draft
    like: Email
    similarity: float

    @property
    def reason(self) -> str:
        # Kept in the ledger's plain `error` column: the earlier email is named by id and
        # date only, never by its subject, which is the person's (and encrypted).
        return (
            f"both drafts read like email {self.like.pk} of {self.like.when:%Y-%m-%d} "
            f"(similarity {self.similarity:.2f})"
        )


def draft_email(*, email: Email, now: datetime) -> WrittenEmail | RepetitiveDraft:
    """Have the model write `email`, and redraft it once if it repeats an earlier one."""
    messages = drafting_messages(email=email, now=now)
    draft, embedding, closest = _draft_and_compare(email, messages)
    if closest is not None:
        like, _ = closest
        messages += [
            {"role": "assistant", "content": f"Subject: {draft.subject}\n\n{draft.body}"},
            {"role": "user", "content": _redraft_request(draft, like)},
        ]
        draft, embedding, closest = _draft_and_compare(email, messages)
        if closest is not None:
            like, similarity = closest
            return RepetitiveDraft(draft=draft, like=like, similarity=similarity)
    return render_email(email=email, draft=draft, embedding=embedding)


def drafting_messages(*, email: Email, now: datetime) -> list[dict[str, Any]]:
    """The system prompt (instructions, the memory block, the last emails) and the ask."""
    user = email.user
    system = [prompt("emails", "follow_up_email"), today_line(now, email.user.time_zone)]
    if user.name:
        system.append(f"Name: {user.name}")
    system.append(assemble_memory_context(user=user, now=now, sent_emails=sent_emails_for_prompt(user)).text)
    previous = emails_recently_sent(user=user)
    if previous:
        system.append(
            "# The last emails you sent them, newest first: nothing you write may read like these\n"
            + "\n".join(f"Previous email: {e.subject} — {e.first_line}" for e in previous)
        )
    return [{"role": "system", "content": "\n\n".join(system)}, {"role": "user", "content": _ask(email)}]


def parse_draft(text: str, *, kind: str) -> Draft:
    """`Subject: ...`, then the body; a missing subject line gets a plain one. Addresses off
    the product's own host are shown as their host alone."""
    lines = text.strip().splitlines()
    first = SUBJECT_LINE.match(lines[0]) if lines else None
    if first and first.group("subject"):
        subject, body = first.group("subject"), "\n".join(lines[1:])
    else:
        subject, body = FALLBACK_SUBJECTS[kind], text
    # An address the model wrote leaves the email as its host alone, unless it is ours
    # (emails/links.py): a mail client would link it, and it could carry the person's words.
    body = addresses_off_site_as_hosts(body.strip(), site_url=settings.SITE_URL)
    subject = addresses_off_site_as_hosts(subject, site_url=settings.SITE_URL)
    # Nobody reads a reply to it: a sentence asking for one goes, and the email links to the chat.
    body = without_reply_asks(body)
    if not body:
        raise llm.LLMError("the model wrote an email with no body", retryable=True)
    return Draft(subject=Truncator(" ".join(subject.split())).chars(SUBJECT_MAX_CHARS), body=body)


def why_this_email(*, kind: str, frequency: str | None) -> str:
    """The footer's first line: why this person gets this email, and how often."""
    if kind == Email.Kind.SESSION_SUMMARY:
        return "You get this because you asked for a short recap after each session."
    how_often = HOW_OFTEN.get(frequency or "", "between sessions")
    return f"You get this because you asked your coach to write to you {how_often}."


def render_email(*, email: Email, draft: Draft, embedding: Embedding) -> WrittenEmail:
    """The draft as plain text and as HTML (escaped, in paragraphs), each with the footer
    that says why it came and unsubscribes in one click."""
    preference = email_preference_for_user(user=email.user)
    context = {
        "subject": draft.subject,
        "body": draft.body,
        "paragraphs": [part.strip() for part in re.split(r"\n\s*\n", draft.body) if part.strip()],
        "why": why_this_email(kind=email.kind, frequency=preference.frequency),
        "site_name": settings.SITE_NAME,
        "site_url": settings.SITE_URL,
        "site_domain": urlsplit(settings.SITE_URL).netloc,
        "chat_url": settings.SITE_URL.rstrip("/") + reverse("chat"),
        "preferences_url": preferences_url(),
        "unsubscribe_url": unsubscribe_url(email.user_id),
    }
    return WrittenEmail(
        subject=draft.subject,
        body_text=render_to_string("emails/follow_up.txt", context).strip() + "\n",
        body_html=render_to_string("emails/follow_up.html", context),
        embedding=embedding,
    )


def _draft_and_compare(
    email: Email, messages: list[dict[str, Any]]
) -> tuple[Draft, Embedding, tuple[Email, float] | None]:
    """A draft, its embedding, and the earlier email it is too like (None if it is not)."""
    draft = parse_draft(llm.complete(messages), kind=email.kind)
    embedding = llm.embed([draft.text])[0]
    closest = email_closest_sent(user=email.user, vector=embedding.vector, model=embedding.model)
    if closest is not None and closest[1] > settings.EMAIL_REPEAT_THRESHOLD:
        return draft, embedding, closest
    return draft, embedding, None


def _ask(email: Email) -> str:
    if email.kind == Email.Kind.CHECK_IN and email.memory is not None:
        due_at = email.memory.due_at
        due = due_at.astimezone(ZoneInfo(email.user.time_zone)).date().isoformat() if due_at else "soon"
        return (
            "Write a check-in about something they have coming up on "
            f"{due}: “{email.memory.summary}”. Ask how it is going, and offer one concrete next step."
        )
    if email.kind == Email.Kind.SESSION_SUMMARY and email.session is not None:
        return (
            "Write a short recap of the session that just ended, from its summary below: what was worked on "
            "and the one next step.\n\nSession summary: " + " ".join(email.session.summary.split())
        )
    return (
        "Write a short nudge between sessions: something that keeps them moving, built on what you know of "
        "them and unlike the emails you sent before."
    )


def _redraft_request(draft: Draft, like: Email) -> str:
    # The rejected draft is listed as a previous email too, so it is avoided like the others.
    return (
        f"That reads too much like the email you sent on {like.when:%Y-%m-%d} (“{like.subject}”). "
        "Write a different one: another subject, another opening, another angle.\n"
        f"Previous email: {draft.subject} — {draft.opening}"
    )
