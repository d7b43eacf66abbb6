"""Everything the app holds about a person, as one JSON document they can download (inside
a zip, beside a page of the same data: accounts/export_archive.py).

Each model that references the user, directly or through another (a message through its
session), is either exported here or listed in NOT_EXPORTED with the reason; a test walks
every model and fails on one that is neither, so a new table cannot be forgotten.
Rows are written field by field from the model, so a new column is exported without a
change here; only embeddings (numbers derived from the exported text) and the password
hash are left out.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any
from uuid import UUID

from allauth.account.models import EmailAddress
from django.db import models
from pgvector.django import VectorField

from accounts.models import User
from accounts.pages import written_by
from coach.models import ChatSession, Message
from coach.prompting import KEPT_PROMPT_FIELDS
from emails.models import Email, EmailPreference
from memory.models import Memory, MemoryEvent, MemoryProposal, PrivateTextViewing
from memory.policy import protection_reason

FORMAT = "coach-account-export"
VERSION = 1

# What each section of the document holds, written into it (and shown on the page of it),
# so the file explains itself to whoever opens it.
SECTIONS = {
    "profile": "your account: your email address, your name, your time zone, when you signed up, and your "
    "settings (whether your coach remembers)",
    "email_addresses": "the email addresses on your account, and whether each is verified",
    "email_preferences": "which emails your coach may send you, how often, and your quiet hours",
    "memories": "each memory your coach keeps about you: its one line (summary), its details (content), "
    "its kind (tier and category), who wrote it, why it is kept if it is protected, and its history",
    "history_of_memories_no_longer_kept": "what happened to memories that are gone (without their words, "
    "if you deleted them)",
    "proposals": "changes your coach suggested to memories you protect, and what you decided",
    "chat_sessions": "your conversations, each with its messages in order and its summary",
    "emails": "the emails your coach sent you or has ready to send",
    "staff_readings": "each time our staff read your private text, and why",
}

# Model label: where its rows are in the document.
EXPORTED = {
    "accounts.user": "profile",
    "account.emailaddress": "email_addresses",
    "emails.emailpreference": "email_preferences",
    "memory.memory": "memories",
    "memory.memoryevent": "memories[].history and history_of_memories_no_longer_kept[].history",
    "memory.memoryproposal": "proposals",
    "coach.chatsession": "chat_sessions",
    "coach.message": "chat_sessions[].messages",
    "emails.email": "emails",
    "memory.privatetextviewing": "staff_readings",
}

# Reviewed: models that reference the user and are deliberately not in the export.
NOT_EXPORTED = {
    "admin.logentry": "the admin's audit log of what staff changed through the admin; about the site's "
    "administration, not the person (erased with the account all the same)",
    "account.emailconfirmation": "a one-time secret key for confirming an address; the address itself is "
    "exported under email_addresses",
    "accounts.loginsession": "the app's record of a signed-in browser (an opaque key and an expiry); ended and "
    "erased with the account",
    "memory.memoryoverlap": "a pair of the person's memories found alike, offered on the memory page to merge; "
    "both memories are exported",
    "emails.weeklyepisoderequest": "the scheduler's note of which weeks were written up; the episodes "
    "themselves are exported as memories",
    "mfa.authenticator": "the person's second-factor secrets (an authenticator app's key, recovery codes); "
    "a file holding them would be a way into the account",
    "coach.conversationembedding": "the vectors by which the look-back finds past exchanges and summaries; "
    "derived from the messages and summaries exported under chat_sessions, and meaningless outside the "
    "embedding model that made them",
    "coach.lookback": "which past conversation the coach looked back at while answering a message, shown "
    "under that reply; both conversations are exported under chat_sessions",
    "accounts.user_groups": "staff permission groups; coached people have none",
    "accounts.user_user_permissions": "staff permissions; coached people have none",
}

# A password hash, and the keyed hash by which a memory's key is found: neither is the
# person's data, and neither means anything outside this app.
_NEVER = frozenset({"password", "key_digest"})
# The app's own working state on a row, no part of what the person said or was told: which
# process answers a message or sends an email, its claim and heartbeat, a conversation's
# kept system prompt (the instructions around the memories exported here) and how it was
# assembled, and where its history starts.
_INTERNAL = {
    "coach.message": frozenset(
        {"attempt", "claimed_at", "claimed_by", "heartbeat_at", "waiting_since", "client_id", "continues_reply_id"}
    ),
    "coach.chatsession": frozenset({*KEPT_PROMPT_FIELDS, "summary_claimed_at", "history_from_id"}),
    "emails.email": frozenset({"claimed_at", "claimed_by", "claim_token", "heartbeat_at", "body_sent_at", "attempts"}),
}


def account_export(*, user: User, now: datetime) -> dict[str, Any]:
    """The person's whole account as plain JSON-ready data, in a fixed number of queries."""
    memories = list(Memory.objects.filter(user=user).defer("embedding").order_by("tier", "pk"))
    history: dict[int | None, list[dict[str, Any]]] = defaultdict(list)
    for event in MemoryEvent.objects.filter(user=user).order_by("created_at", "pk"):
        history[event.memory_id].append(_event(event))
    stored = {m.pk for m in memories}

    messages: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for message in Message.objects.filter(session__user=user).order_by("created_at", "pk"):
        messages[message.session_id].append(_row(message))

    preference = EmailPreference.objects.filter(user=user).first()
    return {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": now.isoformat(),
        "not_included": "embeddings (numbers computed from the text below), your password's hash, and the "
        "app's own working state (which process answers a message, the instructions around your memories)",
        "sections": SECTIONS,
        "profile": _row(user),
        "email_addresses": [_row(a) for a in EmailAddress.objects.filter(user=user).order_by("pk")],
        "email_preferences": _row(preference) if preference else None,
        "memories": [
            {
                **_row(m),
                "written_by": written_by(m),
                "kept_because": protection_reason(m.facts),
                "history": history.get(m.pk, []),
            }
            for m in memories
        ],
        "history_of_memories_no_longer_kept": [
            {"memory_id": memory_id, "history": events}
            for memory_id, events in sorted(history.items(), key=lambda item: item[0] or 0)
            if memory_id not in stored
        ],
        "proposals": [
            {**_row(p, skip={"proposed"}), "memory_key": p.memory.key, "proposed": p.proposed_fields() or None}
            for p in MemoryProposal.objects.filter(user=user).select_related("memory").order_by("created_at", "pk")
        ],
        "chat_sessions": [
            {**_row(s), "messages": messages.get(s.pk, [])}
            for s in ChatSession.objects.filter(user=user).order_by("created_at", "pk")
        ],
        "emails": [_row(e) for e in Email.objects.filter(user=user).defer("embedding").order_by("created_at", "pk")],
        # When staff read the person's private text, and why (which staff member is theirs to ask).
        "staff_readings": [
            _row(v, skip={"viewer", "viewer_email", "person"})
            for v in PrivateTextViewing.objects.filter(person=user).order_by("viewed_at", "pk")
        ],
    }


def _event(event: MemoryEvent) -> dict[str, Any]:
    return {
        **_row(event, skip={"before", "after"}),
        "before": event.before_fields() or None,
        "after": event.after_fields() or None,
    }


def _row(instance: models.Model, *, skip: frozenset[str] | set[str] = frozenset()) -> dict[str, Any]:
    row = {}
    internal = _INTERNAL.get(instance._meta.label_lower, frozenset())
    for field in instance._meta.concrete_fields:
        if field.name in _NEVER or field.name in internal or field.name in skip or isinstance(field, VectorField):
            continue
        row[field.attname] = _plain(getattr(instance, field.attname))
    return row


def _plain(value: Any) -> Any:
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, UUID | Decimal):
        return str(value)
    return value
