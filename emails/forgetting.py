"""Follow-ups drawn on what the person then asked to forget.

An email's text is drawn on memories (a check-in on one intention, a nudge on the
profile) or on a conversation's summary (its recap). When the person deletes what it was
drawn on, one not yet sent is withdrawn (skipped, saying why) and the text of every one,
sent or not, goes, with its embedding. The row stays, with its kind, its period and when
it went: the ledger still says that something was sent, so nothing is sent twice, but no
longer what it said (the chat's prompt quotes the last emails' opening lines).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from django.db.models import Q

from emails.models import Email

if TYPE_CHECKING:
    from accounts.models import User

Kind, Status = Email.Kind, Email.Status
WITHDRAWN = "withdrawn: the person deleted what it was drawn on"


def emails_drawn_on_forget(
    *,
    user: User,
    session_ids: Collection[int] = (),
    memory_ids: Collection[int] = (),
    every_memory: bool = False,
) -> int:
    """Forget the emails drawn on these conversations' summaries (their recaps), on these
    memories (their check-ins), or, with `every_memory`, on any memory (every nudge and
    check-in). Called in the deleting transaction, before the memory or conversation goes
    (their links are then emptied). Returns how many emails lost their text."""
    drawn_on = Q(kind=Kind.SESSION_SUMMARY, session_id__in=list(session_ids)) | Q(memory_id__in=list(memory_ids))
    if every_memory:
        drawn_on |= Q(kind__in=[Kind.NUDGE, Kind.CHECK_IN])
    emails = Email.objects.filter(Q(user=user) & drawn_on)
    # Not gone yet, whether waiting, being drafted or being sent before its end of data:
    # withdrawn, and its claim voided, so a sender at it now finds its token gone, saves no
    # draft and sends nothing (emails.claims).
    not_gone = Q(status__in=[Status.QUEUED, Status.DRAFTING]) | Q(status=Status.SENDING, body_sent_at__isnull=True)
    emails.filter(not_gone).update(status=Status.SKIPPED, error=WITHDRAWN, claim_token=None, claimed_at=None)
    return emails.filter(Q(subject__isnull=False) | Q(embedding__isnull=False)).update(
        subject=None, body_text=None, body_html=None, embedding=None, embedding_model=""
    )
