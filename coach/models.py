"""Chat sessions and their messages. Message text is encrypted at rest."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.utils import timezone
from pgvector.django import VectorField

from infra.encryption import EncryptedTextField
from infra.hashed_words import HashedWordsField

TITLE_MAX_CHARS = 60


class ChatSession(models.Model):
    # Cascades in the database, like memories (see memory.models.Memory.user).
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.DB_CASCADE, related_name="chat_sessions")
    title = EncryptedTextField(blank=True, default="")
    summary = EncryptedTextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)
    last_message_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)
    summarised_at = models.DateTimeField(null=True, blank=True)
    # An ended session waiting for its summary is the record that it needs one (in the
    # database, whatever the broker did); a worker takes it by setting this.
    summary_claimed_at = models.DateTimeField(null=True, blank=True)
    # When the person deleted its summary: none is written again, however the
    # conversation goes on (DESIGN.md section 8).
    summary_forgotten_at = models.DateTimeField(null=True, blank=True)
    # False: a conversation that is not remembered. Nothing is read from memory for it,
    # nothing written to it; it is never summarised, so no recap, episode or email draws
    # on it. Chosen when it starts (and always so while the person has memory off).
    remembered = models.BooleanField(default=True, db_default=True)
    # True: a temporary conversation, one the person chose not to have remembered ("Don't
    # remember this conversation"): never listed, and deleted with everything said in it
    # when they leave it or it ends (coach/temporary.py). One merely held while memory is
    # off is not remembered either, but stays theirs to read.
    temporary = models.BooleanField(default=False, db_default=False)
    # When a page showing a temporary conversation was left (closed, or gone elsewhere):
    # it is deleted unless a page of it is still open a moment later.
    left_at = models.DateTimeField(null=True, blank=True)
    # The system prompt this conversation's turns send, byte for byte, so each request begins
    # with the one before (coach/prompting.py): kept until it must be assembled again, and
    # encrypted, as it quotes memories. With it: its markers' nonce, when it was assembled,
    # the person's day it says "Today" for, the newest memory event it reflects (what came
    # after reaches the model as notes), what its memory block cost, whether it uses memory,
    # when its next intention comes due, what it was assembled from, and how often and why.
    prompt = EncryptedTextField(blank=True, default="")
    prompt_nonce = models.CharField(max_length=32, blank=True, default="")
    prompt_built_at = models.DateTimeField(null=True, blank=True)
    prompt_day = models.DateField(null=True, blank=True)
    prompt_event_id = models.BigIntegerField(null=True, blank=True)
    prompt_memory_tokens = models.PositiveIntegerField(default=0)
    # How many memories its block counts as learned in conversation (the relationship
    # stage): the notes after it count on from there.
    prompt_learned = models.PositiveIntegerField(default=0, db_default=0)
    prompt_remembers = models.BooleanField(default=False)
    prompt_due_next_at = models.DateTimeField(null=True, blank=True)
    prompt_version = models.CharField(max_length=64, blank=True, default="")
    prompt_builds = models.PositiveIntegerField(default=0)
    prompt_built_because = models.CharField(max_length=64, blank=True, default="")
    # Why the kept prompt was dropped before the next turn (it ended; the person deleted
    # what it quoted): the reason the next one is assembled for.
    prompt_cleared_because = models.CharField(max_length=64, blank=True, default="", db_default="")
    # The history sent starts at this message: it moves on by a quarter of the history's
    # budget at a time, so the prefix holds between the steps.
    history_from_id = models.BigIntegerField(null=True, blank=True)
    # Whether its summary, as it stands, was taken up by the look-back's index (embedded, or
    # found empty): what the hourly indexing reads is only the summaries still waiting.
    summary_indexed = models.BooleanField(default=False, db_default=False)

    class Meta:
        indexes = [
            models.Index(fields=["user", "-last_message_at"]),
            models.Index(fields=["ended_at", "last_message_at"]),
            models.Index(
                fields=["ended_at"],
                condition=models.Q(ended_at__isnull=False, summarised_at__isnull=True, remembered=True),
                name="session_awaiting_summary",
            ),
            models.Index(
                fields=["user"],
                condition=models.Q(summarised_at__isnull=False, remembered=True, summary_indexed=False),
                name="session_summary_to_index",
            ),
            # What the emails' planners read each tick: the conversations summarised lately.
            models.Index(
                fields=["summarised_at"], condition=models.Q(summarised_at__isnull=False), name="session_summarised"
            ),
            # The few temporary conversations under way: what the sweep looks through.
            models.Index(fields=["left_at"], condition=models.Q(temporary=True), name="session_temporary"),
        ]

    def __str__(self) -> str:
        return f"session {self.pk} of {self.user_id}"

    @property
    def display_title(self) -> str:
        # A temporary conversation is never named by what was said in it, not even in a
        # browser's history of page titles.
        if self.temporary:
            return "Temporary conversation"
        return self.title or "New conversation"


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"

    class Status(models.TextChoices):
        # A person's message: waiting for a reply, being answered, answered, or failed
        # (the model could not answer; the message is kept and can be retried).
        PENDING = "pending"
        ANSWERING = "answering"
        ANSWERED = "answered"
        FAILED = "failed"
        # A reply: whole, cut off part-way (never passed off as whole), or stopped by the
        # person part-way.
        COMPLETE = "complete"
        INTERRUPTED = "interrupted"
        STOPPED = "stopped"
        # A reply the model stopped at its length limit (COACH_MAX_TOKENS): kept, marked so,
        # and the person may have the coach go on from it.
        LIMITED = "limited"
        # A whole or stopped reply the person had answered again (coach/answer_anew.py): an
        # earlier version they may page back to, never sent to the model nor searched again.
        REPLACED = "replaced"

    # No index of its own: the conversation's indexes below lead with it. Beside them, the
    # planner at 10,000 people read a 200-exchange page's latest ten through this one,
    # every message of the conversation sorted (bin/bench scale).
    session = models.ForeignKey(ChatSession, on_delete=models.DB_CASCADE, related_name="messages", db_index=False)
    role = models.CharField(max_length=16, choices=Role.choices)
    content = EncryptedTextField()
    status = models.CharField(max_length=16, choices=Status.choices)
    # For a reply: the message it answers.
    reply_to = models.ForeignKey("self", on_delete=models.DB_CASCADE, null=True, blank=True, related_name="replies")
    # A browser-made id per submission: the same submission twice is stored once.
    client_id = models.UUIDField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # For a person's message: since when it waits for an answer (posted, or asked again). A
    # message no turn took within TURN_START_SECONDS of this is failed, never before.
    waiting_since = models.DateTimeField(null=True, blank=True)
    # For a person's message: the attempt at answering it that holds it now (each attempt,
    # the first and each retry, claims it with a token of its own), when it claimed it,
    # which process runs it, and when that attempt last showed it was alive. A step that
    # finishes a turn acts only while its attempt's token still holds, so a dead attempt's
    # late step can never overwrite a live one's.
    attempt = models.UUIDField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=200, blank=True, default="")
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # For a person's message whose reply stopped at its length limit: that part-reply, when
    # the person asked the coach to go on from it. Read with the claim, so a turn that is not
    # a continuation costs no query to learn so.
    continues_reply_id = models.BigIntegerField(null=True, blank=True)
    # For a reply: the tokens its turn cost, summed over the turn's model rounds (the memory
    # tools' rounds included), so an operator sees what memory costs. Estimated when the
    # provider did not say, and then marked so.
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    # Of those, what the provider said it read from its cache (a prefix it had seen).
    cached_prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    tokens_estimated = models.BooleanField(default=False, db_default=False)
    # For a person's message: said while their memory was off (or its reply to such a
    # message). Nothing the coach keeps or makes of the conversation reads it: no summary,
    # recap, weekly episode or look-back, even once memory is back on.
    said_with_memory_off = models.BooleanField(default=False, db_default=False)
    # For a person's answered message: whether the look-back's index took its exchange up
    # (embedded, kept out for good, or in a conversation that is not remembered, which is
    # never indexed). What the hourly indexing reads is only the exchanges still waiting.
    indexed = models.BooleanField(default=False, db_default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "client_id"], name="message_client_id_once_per_session")
        ]
        indexes = [
            models.Index(fields=["session", "created_at"]),
            # A conversation's messages in the order they were written: its history for a
            # turn, and its page, read newest first without reading the rest.
            models.Index(fields=["session", "id"], name="message_in_order"),
            # The few messages waiting for, or getting, a reply: what the sweeper and the
            # per-person limit on turns at once look for, among all messages ever sent.
            models.Index(
                fields=["status", "claimed_at"],
                condition=models.Q(status__in=["pending", "answering"]),
                name="message_unanswered",
            ),
            models.Index(
                fields=["session"],
                condition=models.Q(role="user", status="answered", indexed=False),
                name="message_exchange_to_index",
            ),
        ]
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.role} message {self.pk}"


# A person's message still waiting for, or getting, a reply.
UNANSWERED = (Message.Status.PENDING, Message.Status.ANSWERING)


class ConversationEmbedding(models.Model):
    """What the look-back searches (coach/look_back.py): one exchange (a person's message
    and the coach's reply) or a conversation's summary, embedded. Only the vector is kept
    here, plain like a memory's, so search runs in SQL; the words stay in their encrypted
    columns and are read from there. Each row goes with its conversation, its message and
    its person (database cascades), so a deleted conversation leaves nothing searchable."""

    class Kind(models.TextChoices):
        EXCHANGE = "exchange"
        SUMMARY = "summary"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.DB_CASCADE, related_name="+")
    session = models.ForeignKey(ChatSession, on_delete=models.DB_CASCADE, related_name="embeddings")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    # An exchange: the person's message, and the whole reply that answered it (none when
    # the person stopped it); a summary has neither.
    message = models.ForeignKey(Message, on_delete=models.DB_CASCADE, null=True, blank=True, related_name="+")
    reply = models.ForeignKey(Message, on_delete=models.DB_CASCADE, null=True, blank=True, related_name="+")
    # No fixed dimension, as for memories: only rows of the current model are compared.
    # None: an exchange kept out of the look-back for good (said while memory was off).
    embedding = VectorField(null=True, blank=True)
    embedding_model = models.CharField(max_length=100)
    # The words of the exchange (the person's message and the reply) or of the summary, each
    # a keyed hash (infra/hashed_words.py): what the look-back's search by words reads.
    words = HashedWordsField()
    # For a summary: the session's summarised_at it was embedded at (a reopened conversation
    # is summarised again, and its new summary embedded again).
    text_at = models.DateTimeField(null=True, blank=True)
    embedded_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["message"], condition=models.Q(kind="exchange"), name="conversation_embedding_one_per_exchange"
            ),
            models.UniqueConstraint(
                fields=["session"], condition=models.Q(kind="summary"), name="conversation_embedding_one_per_summary"
            ),
            models.CheckConstraint(
                condition=(models.Q(kind="exchange") & models.Q(message__isnull=False))
                | (models.Q(kind="summary") & models.Q(message__isnull=True) & models.Q(reply__isnull=True)),
                name="conversation_embedding_exchange_has_its_message",
            ),
        ]
        indexes = [
            models.Index(fields=["user", "embedding_model"]),
            # Each hash is one person's word, so a posting list holds that person's rows alone.
            GinIndex(fields=["words"], name="conversation_embedding_words"),
            # The rows of another model than EMBEDDING_MODEL, found as a range either side of
            # it among everyone's, for the hourly indexing.
            models.Index(
                fields=["embedding_model"],
                condition=models.Q(embedding__isnull=False),
                name="conversation_embedding_model",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} embedding {self.pk} of session {self.session_id}"


class LookBack(models.Model):
    """A conversation the coach looked back at while answering a person's message: the
    quiet cue under that reply ("Looked back at: your conversation of 3 May"), shown again
    on a reloaded page. Goes with either conversation."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.DB_CASCADE, related_name="+")
    message = models.ForeignKey(Message, on_delete=models.DB_CASCADE, related_name="look_backs")
    looked_at = models.ForeignKey(ChatSession, on_delete=models.DB_CASCADE, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["message", "looked_at"], name="look_back_once_per_conversation_and_turn")
        ]

    def __str__(self) -> str:
        return f"look-back of message {self.message_id} at session {self.looked_at_id}"
