"""The index the look-back searches: each exchange of a remembered conversation (the
person's message and the coach's whole reply) and each conversation's summary, embedded by
EMBEDDING_MODEL, the model memories are embedded by.

An exchange is embedded after its reply is saved, by a task the turn enqueues once the
reply is out (coach/tasks.py), never on the way to the first word; and every hour whatever
is missing (an embedding call that failed, a task the broker lost) or was embedded by
another model than EMBEDDING_MODEL (it changed) is embedded again, as memories are. An
embedding failure leaves the exchange unindexed, to be tried again then; it never fails a
turn. Nothing of a conversation that is not remembered is embedded, nor anything of a
person while their memory is off, nor, ever, an exchange held while it was off. Only
vectors and keyed hashes of the words (infra/hashed_words.py) are written here; the words
stay in their encrypted columns. Never inside a
transaction while waiting on the model.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from coach.models import ChatSession, ConversationEmbedding, Message
from infra import llm
from infra.hashed_words import hashed_words

Kind = ConversationEmbedding.Kind
# Texts per embedding request: a 600-turn conversation is three requests.
EMBED_BATCH_SIZE = 100


@dataclass(frozen=True)
class _Pending:
    """One text to embed, and what its row points at."""

    session_id: int
    text: str
    # What it is found by in words: the whole exchange, the person's words and the reply.
    words: str = ""
    message_id: int | None = None
    reply_id: int | None = None
    text_at: datetime | None = None
    # The attempt that answered the message when its words were read: answered anew since
    # (coach/answer_anew.py), the words embedded may be gone, and the vector is not kept.
    attempt: uuid.UUID | None = None


# Fewer words than this, and what the person said ("yes", "that one") means little alone.
SAID_ALONE_WORDS = 6


def exchange_text(*, said: str, answered: str) -> str:
    """What an exchange is compared by: the person's own words, which a look-back is asked
    about ("what did I say about..."); the coach's reply too only where theirs are too few
    to mean anything alone. A long reply beside them would pull every exchange towards the
    coach's way of speaking (measured on LoCoMo by bin/bench locomo)."""
    if len(said.split()) >= SAID_ALONE_WORDS or not answered.strip():
        return said
    return f"{said}\n{answered}"


def exchange_words(*, said: str, answered: str) -> str:
    """What an exchange is found by in words: all of it, the person's words and the reply.
    Unlike its meaning, words do not drift towards the coach's way of speaking: a word of
    the question in the reply ("your knee") is as telling as in the person's message."""
    return f"{said}\n{answered}"


def exchanges_index(*, user_id: int, batch_size: int = EMBED_BATCH_SIZE) -> int:
    """Embed every exchange and summary of the person's remembered conversations not yet
    embedded by EMBEDDING_MODEL, `batch_size` texts to an embedding request. Returns how
    many were embedded. Nothing while their memory is off. LLMError if the model fails:
    what was embedded before is kept, the rest waits for the next try."""
    if not get_user_model().objects.filter(pk=user_id, memory_enabled=True).exists():
        return 0
    model = settings.EMBEDDING_MODEL
    done = 0
    after_pk = 0
    while batch := _exchanges_after(user_id, model, after_pk, batch_size):
        done += _embedded(batch, user_id=user_id, kind=Kind.EXCHANGE, model=model)
        after_pk = max(item.message_id or 0 for item in batch)
    after_pk = 0
    while batch := _summaries_after(user_id, model, after_pk, batch_size):
        done += _embedded(batch, user_id=user_id, kind=Kind.SUMMARY, model=model)
        after_pk = max(item.session_id for item in batch)
    return done


def exchanges_index_everyone() -> int:
    """exchanges_index for everyone with memory on who has something left to embed (the
    hourly job). Each statement reads only what waits, through an index, so nothing to do
    costs the same whatever the number of people. LLMError as exchanges_index."""
    model = settings.EMBEDDING_MODEL
    # The waiting messages' conversations first, then their owners by primary key: read as
    # one join, PostgreSQL plans a hash of every conversation for the few messages waiting
    # (36 ms for one exchange at 3,000 people, against 0.3 for none).
    # (Without the messages' default order, which a distinct read would carry.)
    sessions = set(Message.objects.filter(_WAITING).order_by().values_list("session_id", flat=True))
    people = {
        *ChatSession.objects.filter(pk__in=sessions).values_list("user_id", flat=True),
        *ChatSession.objects.filter(_SUMMARY_WAITING).values_list("user_id", flat=True).distinct(),
        *_of_another_model(model).values_list("user_id", flat=True).distinct(),
    }
    waiting = get_user_model().objects.filter(pk__in=people, memory_enabled=True).order_by("pk")
    return sum(exchanges_index(user_id=user_id) for user_id in waiting.values_list("pk", flat=True))


def exchange_keep_out(*, user_id: int, message_id: int) -> bool:
    """An exchange of a remembered conversation held while the person's memory was off: it
    is kept out of every look-back, whenever memory comes back on (a row with no embedding
    says so, and goes with the exchange). Whether it was the person's."""
    message = Message.objects.filter(pk=message_id, session__user_id=user_id, role=Message.Role.USER).first()
    if message is None:
        return False
    ConversationEmbedding.objects.bulk_create(
        [
            ConversationEmbedding(
                user_id=user_id,
                session_id=message.session_id,
                kind=Kind.EXCHANGE,
                message_id=message_id,
                embedding=None,
                embedding_model="",
            )
        ],
        ignore_conflicts=True,
    )
    Message.objects.filter(pk=message_id).update(indexed=True)
    return True


# An answered message of the person's whose exchange the index has not taken up yet, and a
# summary likewise (each flag is cleared as its row is written): partial indexes hold
# exactly these.
_WAITING = Q(role=Message.Role.USER, status=Message.Status.ANSWERED, indexed=False)
_SUMMARY_WAITING = Q(summarised_at__isnull=False, remembered=True, summary_indexed=False)


def _of_another_model(model: str) -> QuerySet[ConversationEmbedding]:
    """Rows embedded by another model than `model` (it changed): a range either side of it,
    which an index finds among everyone's; kept-out rows (no embedding) are none of them."""
    return ConversationEmbedding.objects.filter(embedding__isnull=False).filter(
        Q(embedding_model__lt=model) | Q(embedding_model__gt=model)
    )


def _exchanges_waiting(user_id: int, model: str) -> QuerySet[Message]:
    """The person's answered messages in remembered conversations not yet indexed, or
    indexed by another model than `model`."""
    again = _of_another_model(model).filter(user_id=user_id, kind=Kind.EXCHANGE).values("message_id")
    return Message.objects.filter(
        Q(_WAITING) | Q(pk__in=again, role=Message.Role.USER, status=Message.Status.ANSWERED),
        session__user_id=user_id,
        session__remembered=True,
    )


def _summaries_waiting(user_id: int, model: str) -> QuerySet[ChatSession]:
    """The person's summarised, remembered conversations whose summary as it stands is not
    indexed yet, or indexed by another model than `model`."""
    again = _of_another_model(model).filter(user_id=user_id, kind=Kind.SUMMARY).values("session_id")
    return ChatSession.objects.filter(
        Q(_SUMMARY_WAITING) | Q(pk__in=again), user_id=user_id, remembered=True, summarised_at__isnull=False
    )


def _exchanges_after(user_id: int, model: str, after_pk: int, limit: int) -> list[_Pending]:
    messages = list(
        _exchanges_waiting(user_id, model)
        .filter(pk__gt=after_pk)
        .order_by("pk")
        .only("pk", "session_id", "content", "attempt")[:limit]
    )
    if not messages:
        return []
    # The whole reply of each (a stopped one is not what the coach said: the person's
    # words are indexed alone); the latest, should a retry have left more than one.
    replies: dict[int | None, Message] = {}
    whole = Message.objects.filter(reply_to_id__in=[m.pk for m in messages], status=Message.Status.COMPLETE)
    for latest in whole.order_by("pk").only("pk", "reply_to_id", "content"):
        replies[latest.reply_to_id] = latest
    pending = []
    for message in messages:
        reply = replies.get(message.pk)
        text = exchange_text(said=message.content, answered=reply.content if reply else "")
        pending.append(
            _Pending(
                session_id=message.session_id,
                text=text,
                words=exchange_words(said=message.content, answered=reply.content if reply else ""),
                message_id=message.pk,
                reply_id=reply.pk if reply else None,
                attempt=message.attempt,
            )
        )
    return pending


def _summaries_after(user_id: int, model: str, after_pk: int, limit: int) -> list[_Pending]:
    sessions = list(
        _summaries_waiting(user_id, model)
        .filter(pk__gt=after_pk)
        .order_by("pk")
        .only("pk", "summary", "summarised_at")[:limit]
    )
    # An empty summary (nothing was said, or memory was off when it ended) is walked past,
    # with nothing to embed.
    return [_Pending(session_id=s.pk, text=s.summary, words=s.summary, text_at=s.summarised_at) for s in sessions]


def _embedded(batch: list[_Pending], *, user_id: int, kind: str, model: str) -> int:
    texts = [item for item in batch if item.text.strip()]
    if not texts:
        _taken_up(batch, kind=kind)
        return 0
    vectors = llm.embed([item.text for item in texts])
    now = timezone.now()
    with transaction.atomic():
        # Locked, so a conversation being deleted meanwhile either goes first (and its rows
        # are not written) or waits for these rows and takes them with it.
        if kind == Kind.EXCHANGE:
            message_ids = [item.message_id for item in texts if item.message_id is not None]
            locked = Message.objects.select_for_update().filter(pk__in=message_ids, status=Message.Status.ANSWERED)
            answered_by = dict(locked.values_list("pk", "attempt"))
            kept = [
                (item, e)
                for item, e in zip(texts, vectors, strict=True)
                if item.message_id in answered_by and answered_by[item.message_id] == item.attempt
            ]
            alive = {item.message_id for item, _ in kept if item.message_id is not None}
            ConversationEmbedding.objects.filter(kind=kind, message_id__in=alive).delete()
        else:
            session_ids = [item.session_id for item in texts]
            alive = set(ChatSession.objects.select_for_update().filter(pk__in=session_ids).values_list("pk", flat=True))
            kept = [(item, e) for item, e in zip(texts, vectors, strict=True) if item.session_id in alive]
            ConversationEmbedding.objects.filter(kind=kind, session_id__in=alive).delete()
        # Another indexer of the same person may have written the same rows meanwhile: its
        # rows stand, these are dropped.
        created = ConversationEmbedding.objects.bulk_create(
            [
                ConversationEmbedding(
                    user_id=user_id,
                    session_id=item.session_id,
                    kind=kind,
                    message_id=item.message_id,
                    reply_id=item.reply_id,
                    embedding=embedding.vector,
                    embedding_model=embedding.model,
                    words=hashed_words(user_id, item.words),
                    text_at=item.text_at,
                    embedded_at=now,
                )
                for item, embedding in kept
            ],
            ignore_conflicts=True,
        )
        _taken_up(batch, kind=kind)
    return len(created)


def _taken_up(batch: list[_Pending], *, kind: str) -> None:
    """The batch waits no longer: embedded, or with nothing to embed (an empty summary). An
    exchange answered anew meanwhile, or a summary rewritten (its conversation went on, and
    was summarised again), still waits, for its new text."""
    as_read = Q()
    if kind == Kind.EXCHANGE:
        # As answered when read: one answered anew meanwhile waits, for its new words.
        for item in batch:
            as_read |= Q(pk=item.message_id, attempt=item.attempt)
        Message.objects.filter(as_read).update(indexed=True)
        return
    for item in batch:
        as_read |= Q(pk=item.session_id, summarised_at=item.text_at)
    ChatSession.objects.filter(as_read).update(summary_indexed=True)


def exchange_words_rehash(*, batch_size: int = EMBED_BATCH_SIZE) -> int:
    """Hash the words of every indexed exchange and summary again, under the current
    FIELD_LOOKUP_KEY (rotate_encryption_keys, after it changed): what a search by words
    looks for is hashed under it. Returns how many changed. A batch at a time, each its own
    short transaction."""
    changed, last = 0, 0
    while True:
        with transaction.atomic():
            batch = list(
                ConversationEmbedding.objects.select_for_update(of=("self",))
                .filter(pk__gt=last, embedding__isnull=False)
                .select_related("session", "message", "reply")
                .only("pk", "user_id", "kind", "words", "session__summary", "message__content", "reply__content")
                .order_by("pk")[:batch_size]
            )
            if not batch:
                return changed
            for row in batch:
                if row.kind == Kind.SUMMARY:
                    text = row.session.summary
                else:
                    said = row.message.content if row.message is not None else ""
                    text = exchange_words(said=said, answered=row.reply.content if row.reply is not None else "")
                words = hashed_words(row.user_id, text)
                if words != row.words:
                    ConversationEmbedding.objects.filter(pk=row.pk).update(words=words)
                    changed += 1
        last = batch[-1].pk
