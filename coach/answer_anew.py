"""The person's last message answered anew: the same words again (regenerate), or their
words changed in place and then answered (edit), as any chat with a model allows.

Only the last message of a conversation under way, and only once its answer is over
(answered, stopped or failed): a message being answered is refused with words (Stop is
there for it), an earlier one or an ended conversation too. The conversation's row is
locked while it is decided, as a new message locks it, so two asks at once (two tabs, a
double click) make one answer: the second finds the answer it was shown already replaced
and is shown the new one instead.

What stays and what goes:
- Regenerate keeps the replies the message had (whole or stopped) as earlier answers the
  person may page back to (status REPLACED). Nothing reads them but that page and the
  export: the history sent to the model takes whole replies only, the summary too, and the
  exchange's embedding goes, so a look-back finds it again only as the new answer makes it.
- Edit overwrites the words in their encrypted column (and the conversation's title, when
  it came from them), and every reply to them goes: they answered words that are no longer
  there, and kept as versions they would keep the substance of those words. The embedding
  of the exchange goes too.
- Both leave what the earlier answers saved to memory where it is: shown under the
  exchange with its Undo, and sent to the model as notes after the message (each request
  still begins with the one before it up to the message: coach/prompting.py). The
  look-backs the earlier answers made go from under it: the new answer shows its own. The
  earlier answer's stream in Redis goes once the transaction is over.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction
from django.utils import timezone
from redis import RedisError

from coach import streams
from coach.models import UNANSWERED, ChatSession, ConversationEmbedding, LookBack, Message
from coach.services import TooManyTurns, message_text_checked, title_from
from coach.statements import SessionWithRunningTurns, session_locked

logger = logging.getLogger(__name__)

Status = Message.Status

NOT_LAST = "Only your last message can be answered again or edited."
ENDED = "This conversation has ended, so its messages can't be answered again. Start a new one to go on."
STILL_ANSWERING = "Your coach is still answering this message. Wait for the reply, or stop it, then try again."
CHANGED_ELSEWHERE = (
    "This message was answered again in another tab while you edited it. "
    "Reload the page to see it; your words are still in the box."
)
# Replies kept as earlier answers when the message is answered again: what the person read.
KEPT_AS_EARLIER = (Status.COMPLETE, Status.STOPPED)


class AnswerAnewRefused(Exception):
    """The message cannot be answered anew now; the text says why, to the person."""


def message_regenerate(
    *,
    user_id: int,
    session_id: int,
    message_id: int,
    asked_at: datetime | None,
    turns_at_most: int | None = None,
    now: datetime | None = None,
) -> bool:
    """Have the coach answer the person's last message again: its replies become earlier
    answers, and it waits for a new one. `asked_at` is when the answer the person saw was
    asked for (the message's `waiting_since` as their page showed it). Whether it was asked
    now (the caller starts its turn); False when it had been already, since that page was
    shown (the same click twice, another tab). Message.DoesNotExist if it is not theirs;
    AnswerAnewRefused, or TooManyTurns as for a new message."""
    now = now or timezone.now()
    with transaction.atomic():
        session, message = _locked(user_id=user_id, session_id=session_id, message_id=message_id)
        if not _still_as_shown(message, asked_at):
            return False
        _refuse_if_busy(session, turns_at_most)
        _kept_as_earlier(message)
        _asked_anew(session, message, now=now)
    _stream_forget(message.pk)
    return True


def message_edit(
    *,
    user_id: int,
    session_id: int,
    message_id: int,
    text: str,
    asked_at: datetime | None,
    turns_at_most: int | None = None,
    now: datetime | None = None,
) -> bool:
    """Put `text` in place of the person's last message and have the coach answer it: the
    earlier words are gone from the database, and every reply to them with them. Text as
    unchanged as it was is answered again, like message_regenerate. Whether it was asked
    now; False when this very edit was made already (a second click). MessageRejected for
    text that cannot be sent, and the rest as message_regenerate; CHANGED_ELSEWHERE when
    the message was answered anew since the page was shown, so the person sees that answer
    before their edit replaces it."""
    now = now or timezone.now()
    text = message_text_checked(text)
    with transaction.atomic():
        session, message = _locked(user_id=user_id, session_id=session_id, message_id=message_id)
        unchanged = message.content == text
        if not _still_as_shown(message, asked_at):
            if unchanged:
                return False
            raise AnswerAnewRefused(CHANGED_ELSEWHERE)
        _refuse_if_busy(session, turns_at_most)
        if unchanged:
            _kept_as_earlier(message)
        else:
            Message.objects.filter(reply_to=message).delete()
            message.content = text
            message.save(update_fields=["content"])
            first = Message.objects.filter(session=session, role=Message.Role.USER).order_by("pk").first()
            if first is not None and first.pk == message.pk:
                # The title is the first message's first line: it goes with the words.
                ChatSession.objects.filter(pk=session.pk).update(title=title_from(text))
        _asked_anew(session, message, now=now)
    _stream_forget(message.pk)
    return True


def _locked(*, user_id: int, session_id: int, message_id: int) -> tuple[SessionWithRunningTurns, Message]:
    """The person's conversation and message, both locked: the conversation as a new
    message locks it, the message as the exchange index locks it before it writes, so an
    embedding of the earlier words made meanwhile is either there to delete or never
    written (coach/exchange_index.py checks the attempt it read is still the message's)."""
    session = session_locked(user_id=user_id, session_id=session_id)
    if session is None:
        raise Message.DoesNotExist(f"no conversation {session_id} of person {user_id}")
    message = (
        Message.objects.select_for_update().filter(pk=message_id, session_id=session.pk, role=Message.Role.USER).first()
    )
    if message is None:
        raise Message.DoesNotExist(f"no message {message_id} in conversation {session_id}")
    if session.ended_at is not None:
        raise AnswerAnewRefused(ENDED)
    last = Message.objects.filter(session_id=session.pk, role=Message.Role.USER).order_by("-pk").first()
    if last is None or last.pk != message.pk:
        raise AnswerAnewRefused(NOT_LAST)
    return session, message


def _still_as_shown(message: Message, asked_at: datetime | None) -> bool:
    """Whether the message's answer is the one the person's page showed; AnswerAnewRefused
    while that answer is still being written."""
    if asked_at is not None and message.waiting_since is not None and message.waiting_since != asked_at:
        # Asked anew since (this same click, or another tab): that ask is the one answered.
        return False
    if message.status in UNANSWERED:
        raise AnswerAnewRefused(STILL_ANSWERING)
    return True


def _refuse_if_busy(session: SessionWithRunningTurns, turns_at_most: int | None) -> None:
    # An answer anew spends the model as a new message does, under the same limit.
    if turns_at_most is not None and session.running_turns >= turns_at_most:
        raise TooManyTurns(session.running_turns)


def _kept_as_earlier(message: Message) -> None:
    """The message's whole and stopped replies become earlier answers; part-replies of a
    failed attempt go, as on a retry: nobody was shown them whole."""
    replies = Message.objects.filter(reply_to=message)
    replies.filter(status__in=KEPT_AS_EARLIER).update(status=Status.REPLACED)
    replies.exclude(status=Status.REPLACED).delete()


def _asked_anew(session: ChatSession, message: Message, *, now: datetime) -> None:
    """The message waits for a new answer from now (the sweep judges it by when it was
    asked); whatever the earlier answers left of it besides memories goes."""
    Message.objects.filter(pk=message.pk).update(
        status=Status.PENDING,
        error="",
        attempt=None,
        claimed_at=None,
        claimed_by="",
        heartbeat_at=None,
        waiting_since=now,
        continues_reply_id=None,
    )
    # The look-back's vector of the earlier exchange; a row kept out for good (said while
    # memory was off) stays, with no vector, and keeps it out.
    ConversationEmbedding.objects.filter(
        kind=ConversationEmbedding.Kind.EXCHANGE, message_id=message.pk, embedding__isnull=False
    ).delete()
    LookBack.objects.filter(message_id=message.pk).delete()
    # Idle conversations end after a while with no message: this is one.
    ChatSession.objects.filter(pk=session.pk).update(last_message_at=now, updated_at=now)


def _stream_forget(message_id: int) -> None:
    """The earlier answer's stream (its words, its cues) goes: the new answer writes its own
    from the start, and no attempt of the earlier one writes there again."""
    try:
        streams.reply_forget(message_id)
    except RedisError as error:
        # Redis is away: the stream expires within the hour on its own, and a reader shown
        # the earlier answer meanwhile is shown the new one from the database once saved.
        logger.warning("the earlier answer to message %s could not be cleared from its stream: %s", message_id, error)
