"""Every way a person makes the app forget: a memory, all of them, a conversation's summary,
a conversation, the whole account.

Each reaches the places accounts/where_words_live.py lists for it, in one transaction for
the database (the rows, the emails drawn on them, the conversations' kept prompts that
quote them), then Redis (replies kept for a reload, the cues naming what went), which is
never waited on inside the transaction. Words said with memory off, and conversations
not remembered, are kept out where they would go (coach.services.message_keep_out, the
summaries, the look-back), not deleted afterwards; a temporary conversation is then deleted
whole when the person leaves it or it ends, by the chat itself (coach/temporary.py), which
holds nothing of it anywhere else to reach.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from urllib.parse import urlsplit

import redis
from allauth.account.models import EmailAddress
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import User
from coach.prompting import kept_prompts_clear
from coach.selectors import messages_with_replies_kept
from coach.services import session_delete, session_streams_forget, session_summary_forget
from coach.stream_cues import memory_cues_forget
from coach.streams import replies_forget
from emails.forgetting import emails_drawn_on_forget
from emails.outbox import mail_forget
from infra.cache import cache_delete_matching
from memory.models import Memory, MemoryProposal
from memory.proposals import proposal_confirm
from memory.services import memory_delete, memory_delete_all
from memory.undo import DeletedMemory

logger = logging.getLogger(__name__)


def memory_delete_by_person(*, user: User, memory_id: int) -> DeletedMemory:
    """The person deletes one of their memories (memory_delete, which raises MemoryNotFound
    for one that is gone): with it, a check-in drawn on it, and every kept prompt that
    quotes it; then the cues naming it in their replies kept in Redis for a reload."""
    with transaction.atomic():
        emails_drawn_on_forget(user=user, memory_ids=[memory_id])
        deleted = memory_delete(user=user, memory_id=memory_id, actor="user")
        kept_prompts_clear(user_id=user.pk)
    _memory_cues_forget(user, memory_ids={memory_id})
    return deleted


def proposal_confirm_by_person(*, user: User, proposal: MemoryProposal) -> Memory | None:
    """The person confirms one of the coach's suggestions (proposal_confirm). One that
    deletes the memory is the person's deletion, and reaches what memory_delete_by_person
    does; one that changes it is their correction, which the next turn's prompt is
    assembled again for (coach.prompting)."""
    if proposal.kind != MemoryProposal.Kind.DELETE:
        # Embeds the new text first: never inside a transaction.
        return proposal_confirm(user=user, proposal_id=proposal.pk)
    with transaction.atomic():
        emails_drawn_on_forget(user=user, memory_ids=[proposal.memory_id])
        proposal_confirm(user=user, proposal_id=proposal.pk)
        kept_prompts_clear(user_id=user.pk)
    _memory_cues_forget(user, memory_ids={proposal.memory_id})
    return None


def memories_delete_all_by_person(*, user: User) -> int:
    """The person deletes every memory, history included, and with them the text of every
    email drawn on memories, every kept prompt, and (after) every memory cue of their
    replies kept in Redis. Undo tokens handed out before now no longer bring anything back.
    Returns how many memories went."""
    with transaction.atomic():
        emails_drawn_on_forget(user=user, every_memory=True)
        count = memory_delete_all(user=user)
        kept_prompts_clear(user_id=user.pk)
        # Voids every undo token handed out before now (memory_undo_delete reads it).
        user.memories_deleted_all_at = timezone.now()
        User.objects.filter(pk=user.pk).update(memories_deleted_all_at=user.memories_deleted_all_at)
    _memory_cues_forget(user, memory_ids=None)
    return count


def summary_forget_by_person(*, user: User, session_id: int) -> bool:
    """The person deletes what the coach kept of a conversation: its summary and its
    embedding (coach.services.session_summary_forget), its recap (withdrawn if not sent yet,
    its text gone either way), and the kept prompts that quote the recap. The conversation
    stays. Whether there was a summary of theirs to delete."""
    with transaction.atomic():
        if not session_summary_forget(user=user, session_id=session_id):
            return False
        if emails_drawn_on_forget(user=user, session_ids=[session_id]):
            kept_prompts_clear(user_id=user.pk)
    return True


def conversation_delete_by_person(*, user: User, session_id: int) -> bool:
    """The person deletes a conversation for good: its messages, summary, embeddings and
    look-backs (coach.services.session_delete), the text of its recap, the kept prompts
    that quote it; then its replies and the cues naming it in Redis. What the coach kept
    of it as memories stays, on the memory page. Whether it was theirs."""
    with transaction.atomic():
        emails_drawn_on_forget(user=user, session_ids=[session_id])
        message_ids = session_delete(user=user, session_id=session_id)
        if message_ids is None:
            transaction.set_rollback(True)
            return False
        kept_prompts_clear(user_id=user.pk)
    session_streams_forget(user=user, session_id=session_id, message_ids=message_ids)
    return True


def _memory_cues_forget(user: User, *, memory_ids: set[int] | None) -> None:
    replies = messages_with_replies_kept(user=user, now=timezone.now())
    try:
        memory_cues_forget(replies, memory_ids)
    except redis.RedisError as error:
        # The memory is deleted; the streams that named it expire within the hour.
        logger.warning("memory cues could not be taken out of reply streams now: %s", error)


def account_delete(*, user: User, hosts: Iterable[str] = ()) -> None:
    """Erase the person and every row about them, and what the cache counted of them.

    Memories, their events and proposals, chat sessions and messages, emails, email
    preferences and login sessions cascade in the database itself; allauth's rows (email
    addresses and their confirmations) and the admin log cascade in Django's collector.
    One transaction: either all of it goes or none of it does. Then, outside it, their
    replies still kept in Redis streams (a reload's replay: the coach's words and memory
    cues) and the rate-limit counters kept under their id, their address, or "host:address"
    for each of `hosts` (the host names they may have signed in at) are deleted. A reply
    still being written as they go cannot be saved (its message is gone), and its stream
    expires minutes after it ends.
    """
    email = user.email.lower()
    addresses = {
        email,
        *(address.lower() for address in EmailAddress.objects.filter(user=user).values_list("email", flat=True)),
    }
    replies = messages_with_replies_kept(user=user, now=timezone.now())
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
        replies_forget(replies)
    except redis.RedisError as error:
        # The person is erased; the streams expire within the hour on their own.
        logger.warning("reply streams of an erased account could not be deleted now: %s", error)
    try:
        cache_delete_matching([f"allauth:rl:*:user:{user.pk}", *(f"allauth:rl:*:{digest}" for digest in digests)])
    except redis.RedisError as error:
        # The person is erased; these counters of theirs expire within minutes on their own.
        logger.warning("rate-limit counters of an erased account could not be deleted now: %s", error)
