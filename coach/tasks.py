"""Background work of the chat: ending idle sessions, deleting temporary ones that were
left or went idle, summarising ended ones, ending turns whose process died, and embedding
exchanges for the look-back.

Only what is remembered is summarised: a conversation that is not remembered never is,
a session that ends while the person has memory off is closed with no summary (no model
call), and what was said with memory off is left out of any summary, so nothing of it
reaches a recap or a weekly episode."""

from __future__ import annotations

import logging

from celery import Task, shared_task
from django.conf import settings
from django.db import transaction

from coach.claims import turns_sweep
from coach.exchange_index import exchanges_index, exchanges_index_everyone
from coach.models import ChatSession, Message
from coach.selectors import session_messages
from coach.services import session_summary_save, sessions_end_idle, summaries_due
from coach.temporary import temporary_conversations_sweep
from infra import llm
from infra.llm import LLMError
from infra.prompts import prompt

logger = logging.getLogger(__name__)
RETRY_MAX_SECONDS = 600
SILENCE_MARGIN = 4


@shared_task
def end_idle_sessions() -> int:
    """Every few minutes: end the sessions nobody has written in for a while (each is then
    summarised)."""
    return sessions_end_idle()


@shared_task(ignore_result=True)
def sweep_temporary_conversations() -> int:
    """Every ten seconds: delete the temporary conversations whose person left them, or
    that went idle, with no page of them open (coach/temporary.py)."""
    return temporary_conversations_sweep()


@shared_task(ignore_result=True)
def sweep_stale_turns() -> int:
    """Every half minute, behind the sweep each web process runs: a turn whose process is
    gone is handed back to the person, failed and retryable (never answered twice: a retry
    is a new claim). From here an outage of the database cannot be told from a silent
    turn, so a heartbeat counts only after four times the usual silence."""
    return turns_sweep(silent_seconds=settings.COACH_TURN_SILENT_SECONDS * SILENCE_MARGIN)


@shared_task(ignore_result=True)
def summarise_ended_sessions() -> int:
    """Every half minute: hand out a summary task for each ended session still without a
    summary. Ending a session only marks it ended, so a broker that was away when it ended
    delays its summary and never loses it."""
    ids = summaries_due()
    for session_id in ids:
        summarise_session.delay(session_id)
    return len(ids)


@shared_task(bind=True, acks_late=True, max_retries=5)
def summarise_session(self: Task[[int], None], session_id: int) -> None:
    """Write the short summary of an ended session (for its recap email). A model outage
    is retried with backoff; an answer that can never come is logged and left."""
    try:
        _summarise(session_id)
    except LLMError as error:
        if not error.retryable:
            logger.warning("session %s cannot be summarised: %s", session_id, error)
            return
        # Backoff stays far below Redis's visibility timeout (see settings).
        raise self.retry(exc=error, countdown=min(RETRY_MAX_SECONDS, 30 * 2**self.request.retries)) from error


def _summarise(session_id: int) -> None:
    session = ChatSession.objects.filter(pk=session_id, summarised_at__isnull=True).select_related("user").first()
    if session is None or not session.remembered:
        return
    if not session.user.memory_enabled:
        session_summary_save(session=session, summary="")
        return
    said = session_messages(session=session)
    # What was said with memory off, and the coach's answers to it, are no part of it.
    kept_out = {m.pk for m in said if m.said_with_memory_off}
    # Each message whole, its lists and paragraphs as written, under who said it.
    lines = [
        f"{'Person' if m.role == Message.Role.USER else 'Coach'}:\n{m.content.strip()}"
        for m in said
        if (m.role == Message.Role.USER or m.status == Message.Status.COMPLETE)
        and m.pk not in kept_out
        and m.reply_to_id not in kept_out
    ]
    if not lines:
        # Nothing was said that could be summarised: done, with an empty summary.
        session_summary_save(session=session, summary="")
        return
    summary = llm.complete(
        [
            {"role": "system", "content": prompt("coach", "session_summary")},
            {"role": "user", "content": "\n\n".join(lines)},
        ]
    )
    # A summary is a fact the emails app picks up (a recap, the week's episode): the chat
    # sits below emails and does not call it.
    if session_summary_save(session=session, summary=summary):
        # The look-back searches summaries too; embedding it is a task of its own, so an
        # embedding outage never sends the summary to be written again.
        transaction.on_commit(lambda: exchanges_index_soon(user_id=session.user_id))


@shared_task(ignore_result=True, acks_late=True)
def index_exchanges(user_id: int) -> int:
    """After a reply is saved (or a summary written): the person's exchanges and summaries
    not yet embedded are embedded, for the look-back. An embedding failure leaves them
    unindexed; the hourly job tries again. Never fails a turn: it runs after it."""
    try:
        return exchanges_index(user_id=user_id)
    except LLMError as error:
        logger.warning("exchanges of person %s could not be embedded yet: %s", user_id, error)
        return 0


def exchanges_index_soon(*, user_id: int) -> None:
    """Hand the person's latest exchange to a worker to embed. A broker that is away only
    delays it, to the hourly job: the reply it follows is saved and sent already."""
    try:
        index_exchanges.delay(user_id)
    except Exception as error:
        logger.warning("exchanges of person %s not handed out to embed (%s); the hourly job will", user_id, error)


@shared_task(ignore_result=True)
def reindex_exchanges() -> int:
    """Every hour, with the memories' re-embedding: exchanges and summaries left unindexed
    (an embedding call failed, a task was lost) or embedded by another model than
    EMBEDDING_MODEL (it changed) are embedded again. Nothing to do costs one query."""
    try:
        return exchanges_index_everyone()
    except LLMError as error:
        # The next tick tries again; what was done so far is kept.
        logger.warning("exchanges could not be embedded yet: %s", error)
        return 0
