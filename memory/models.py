"""What the coach remembers of a person, who wrote it, and every change to it.

Text is encrypted at rest, keys included: a key the model chose ("divorce-papers") says as
much as the note. A key is found by its lookup digest, a keyed hash of the person and the
key (infra.encryption.lookup_digest), unique per person. Embeddings stay plain so
similarity search runs in SQL.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import Q
from django.utils import timezone
from pgvector.django import VectorField

from infra.encryption import EncryptedTextField, lookup_digest
from infra.hashed_words import HashedWordsField
from memory.embeddings import memory_text
from memory.policy import PROTECTED_CATEGORIES, USER_SOURCES, MemoryFacts, is_protected

SUMMARY_MAX_CHARS = 150
KEY_MAX_CHARS = 64


class Tier(models.TextChoices):
    PROFILE = "profile", "Profile"
    EPISODIC = "episodic", "Episodic"
    PROSPECTIVE = "prospective", "Prospective"


class Category(models.TextChoices):
    INJURY = "injury"
    SAFETY = "safety"
    MEDICAL = "medical"
    ALLERGY = "allergy"
    CONSTRAINT = "constraint"
    BACKGROUND = "background"
    PREFERENCE = "preference"
    GOAL = "goal"
    HABIT = "habit"
    SCHEDULE = "schedule"
    FEEDBACK = "feedback"
    PROJECT = "project"
    REFERENCE = "reference"
    EPISODE = "episode"
    OTHER = "other"


class Source(models.TextChoices):
    USER = "user", "you"
    ONBOARDING = "onboarding", "onboarding"
    MANUAL = "manual", "you edited it"
    COACH = "coach", "your coach"
    # Written or changed by staff in the admin: never passed off as the person's own words.
    ADMIN = "admin", "an administrator"


class ImportedFrom(models.TextChoices):
    """The assistant a person said an imported memory came from (the import page's choice:
    a name from this list, never words of theirs)."""

    CHATGPT = "chatgpt", "ChatGPT"
    CLAUDE = "claude", "Claude"
    GEMINI = "gemini", "Gemini"
    COPILOT = "copilot", "Microsoft Copilot"
    META_AI = "meta-ai", "Meta AI"
    PERPLEXITY = "perplexity", "Perplexity"
    ANOTHER = "another", "another assistant"


def author_for_model(source: str) -> str:
    """Who wrote a memory, as the model is told it, in the block and in every tool result
    alike: "them" (the person told it or wrote it), "you" (the coach's own note), "support"."""
    if source == Source.COACH:
        return "you"
    if source == Source.ADMIN:
        return "support"
    return "them"


class ProspectiveStatus(models.TextChoices):
    OPEN = "open"
    RAISED = "raised"
    DONE = "done"
    DISMISSED = "dismissed"


def key_digest(user_id: int, key: str) -> str:
    """How a memory's key is found: a keyed hash of the person and the key, never the key."""
    return lookup_digest(f"memory-key:{user_id}:{key}")


class MemoryQuerySet(models.QuerySet["Memory"]):
    def keyed(self, user_id: int, key: str) -> MemoryQuerySet:
        """The person's memory named `key` (at most one)."""
        return self.filter(user_id=user_id, key_digest=key_digest(user_id, key))

    def protected(self) -> MemoryQuerySet:
        return self.filter(_PROTECTED)

    def unprotected(self) -> MemoryQuerySet:
        return self.exclude(_PROTECTED)


# The policy's rule as SQL, for the admin and for counting; the policy stays the authority.
_PROTECTED = Q(source__in=USER_SOURCES) | Q(category__in=PROTECTED_CATEGORIES)


class Memory(models.Model):
    # Deletes cascade in the database itself (here and in every model that points at a
    # memory or a session), so evictions and account erasure are single statements.
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.DB_CASCADE, related_name="memories")
    key = EncryptedTextField()
    # Set from `key` on every save; lookups and the uniqueness of a key go through it.
    key_digest = models.CharField(max_length=64, editable=False)
    tier = models.CharField(max_length=16, choices=Tier.choices)
    category = models.CharField(max_length=16, choices=Category.choices)
    source = models.CharField(max_length=16, choices=Source.choices)
    # For a memory the person imported (source `user`): the assistant they said it came from.
    imported_from = models.CharField(max_length=16, choices=ImportedFrom.choices, blank=True, default="", db_default="")
    summary = EncryptedTextField()
    content = EncryptedTextField()
    # No fixed dimension, so any embedding model fits; search compares only rows of the
    # current model (see selectors), which also rules out an ANN index on this column.
    embedding = VectorField(null=True, blank=True)
    embedding_model = models.CharField(max_length=100, blank=True)
    # The words of the summary and the note, each a keyed hash (infra/hashed_words.py), set
    # from them on every write: what a search by words reads, never the words themselves.
    words = HashedWordsField(source="words_source")
    due_at = models.DateTimeField(null=True, blank=True)
    # Only the month is known ("a trip in May"): `due_at` is its first morning, and the date
    # is said as the month, never as a day nobody gave.
    due_month_only = models.BooleanField(default=False, db_default=False)
    status = models.CharField(max_length=16, choices=ProspectiveStatus.choices, blank=True)
    raised_at = models.DateTimeField(null=True, blank=True)
    # When the coach wrote to the person to ask how it is going (a check-in email): an
    # intention is asked about once, so the planning of check-ins reads only the others.
    asked_at = models.DateTimeField(null=True, blank=True)
    # Where the coach learned it: the chat's session and message ids, as plain numbers.
    # Memory sits below the chat (DESIGN.md section 7) and holds no reference to its tables.
    session_id = models.BigIntegerField(null=True, blank=True)
    message_id = models.BigIntegerField(null=True, blank=True)
    # Bumped on every change: a proposal applies only to the version it was made against.
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    objects = MemoryQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "key_digest"], name="memory_key_digest_unique_per_user"),
            # An intention has a status and may have a date (undated ones come up at the
            # next conversation); nothing else has either.
            models.CheckConstraint(
                condition=(Q(tier="prospective") & ~Q(status=""))
                | (~Q(tier="prospective") & Q(due_at__isnull=True) & Q(status="")),
                name="memory_status_when_prospective_due_at_only_then",
            ),
        ]
        indexes = [
            models.Index(fields=["user", "updated_at"]),
            # Each hash is one person's word, so a posting list holds that person's rows alone.
            GinIndex(fields=["words"], name="memory_words"),
            # Check-in planning scans only the open intentions not asked about yet, across
            # everyone, by date.
            models.Index(
                fields=["due_at"],
                name="memory_intentions_to_ask",
                condition=Q(tier="prospective", status="open", asked_at__isnull=True),
            ),
            # The hourly re-embedding reads only what needs it: memories with no embedding,
            # and those of another model than EMBEDDING_MODEL (a range either side of it).
            models.Index(fields=["id"], name="memory_unembedded", condition=Q(embedding__isnull=True)),
            models.Index(fields=["embedding_model"], name="memory_embedding_model"),
        ]
        verbose_name_plural = "memories"

    def __str__(self) -> str:
        # Never the key or the text: this is what logs and the admin print.
        return f"memory {self.pk} of {self.user_id}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.set_key_digest()
        update_fields = kwargs.get("update_fields")
        if update_fields is not None and "key" in update_fields:
            kwargs["update_fields"] = update_fields = {*update_fields, "key_digest"}
        if update_fields is not None and {"summary", "content"} & set(update_fields):
            kwargs["update_fields"] = {*update_fields, "words"}
        super().save(*args, **kwargs)

    def words_source(self) -> tuple[int, str]:
        """Whose words, and which: what `words` is hashed from (the text it is embedded by)."""
        return self.user_id, memory_text(summary=self.summary, content=self.content)

    def set_key_digest(self) -> None:
        """From the key, before every write of the row."""
        self.key_digest = key_digest(self.user_id, self.key)

    @property
    def facts(self) -> MemoryFacts:
        return MemoryFacts(
            ref=self.pk, source=self.source, category=self.category, tier=self.tier, updated_at=self.updated_at
        )

    @property
    def is_protected(self) -> bool:
        return is_protected(self.facts)

    def snapshot(self) -> str:
        """Everything needed to show or restore this memory, as JSON for an event."""
        return json.dumps(
            {
                "key": self.key,
                "tier": self.tier,
                "category": self.category,
                "source": self.source,
                "summary": self.summary,
                "content": self.content,
                "due_at": self.due_at.isoformat() if self.due_at else None,
                "due_month_only": self.due_month_only,
                "status": self.status,
            }
        )


class MemoryEvent(models.Model):
    """Append-only history of every change to a user's memories, evictions included."""

    class Actor(models.TextChoices):
        USER = "user"
        COACH = "coach"
        ADMIN = "admin"
        SYSTEM = "system"

    class Action(models.TextChoices):
        CREATED = "created"
        UPDATED = "updated"
        MERGED = "merged"
        DELETED = "deleted"
        EVICTED = "evicted"
        RESTORED = "restored"
        PROPOSAL_MADE = "proposal_made", "proposal made"
        PROPOSAL_CONFIRMED = "proposal_confirmed", "proposal confirmed"
        PROPOSAL_REJECTED = "proposal_rejected", "proposal rejected"
        REEMBEDDED = "reembedded", "re-embedded"
        RAISED = "raised"

    # Found by the indexes below, which all begin with it.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.DB_CASCADE, related_name="memory_events", db_index=False
    )
    # The memory's id, kept after the memory is gone: its history outlives it. A plain
    # number, so deleting the memory leaves the history in place.
    memory_id = models.BigIntegerField(null=True, blank=True)
    # The key it had then; blanked, like the text, when the person deletes the memory.
    key = EncryptedTextField(null=True, blank=True)
    actor = models.CharField(max_length=16, choices=Actor.choices)
    action = models.CharField(max_length=32, choices=Action.choices)
    reason = EncryptedTextField(blank=True, default="")
    # JSON snapshots (Memory.snapshot) before and after; blanked when the user deletes.
    before = EncryptedTextField(null=True, blank=True)
    after = EncryptedTextField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            models.Index(fields=["user", "memory_id", "created_at"], name="memory_event_history"),
            models.Index(fields=["user", "action", "created_at"]),
            # A person's newest event (what a turn's prompt reflects), read from the end of
            # their own events, not from the end of everyone's.
            models.Index(fields=["user", "id"], name="memory_event_newest"),
            # What the nightly pruning reads: forgotten notes whose text is still in their
            # history, and whose histories grew lately.
            models.Index(
                fields=["created_at"],
                name="memory_event_forgotten_text",
                condition=Q(action="evicted", before__isnull=False),
            ),
            models.Index(fields=["created_at"], name="memory_event_when"),
        ]
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.action} of memory {self.memory_id} by {self.actor}"

    def before_fields(self) -> dict[str, Any]:
        return json.loads(self.before) if self.before else {}

    def after_fields(self) -> dict[str, Any]:
        return json.loads(self.after) if self.after else {}


class MemoryProposal(models.Model):
    """A change the coach (or staff) asked for on a protected memory, waiting for the user."""

    class Kind(models.TextChoices):
        UPDATE = "update"
        DELETE = "delete"

    class Status(models.TextChoices):
        PENDING = "pending"
        CONFIRMED = "confirmed"
        REJECTED = "rejected"

    class SuggestedBy(models.TextChoices):
        COACH = "coach", "your coach"
        ADMIN = "admin", "our support team"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.DB_CASCADE, related_name="memory_proposals")
    # Staff change a protected memory only by suggesting it, like the coach (DESIGN.md section 8).
    suggested_by = models.CharField(
        max_length=16, choices=SuggestedBy.choices, default=SuggestedBy.COACH, db_default=SuggestedBy.COACH
    )
    memory = models.ForeignKey(Memory, on_delete=models.DB_CASCADE, related_name="proposals")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    # For an update: the memory's fields as the coach would have them (JSON snapshot).
    proposed = EncryptedTextField(null=True, blank=True)
    reason = EncryptedTextField(blank=True, default="")
    base_version = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    created_at = models.DateTimeField(default=timezone.now)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["user", "status", "created_at"])]

    def __str__(self) -> str:
        return f"{self.kind} {self.memory_id} ({self.status})"

    def proposed_fields(self) -> dict[str, Any]:
        return json.loads(self.proposed) if self.proposed else {}


class MemoryOverlap(models.Model):
    """A safety note the coach saved although it reads like another memory: safety notes
    are never held back as near-copies (keeping too much about safety is wasteful, never
    wrong), so the overlap is offered to the person instead, to merge or to keep both."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.DB_CASCADE, related_name="memory_overlaps")
    # The note just saved, and the memory it reads like. Each overlap goes with either.
    memory = models.ForeignKey(Memory, on_delete=models.DB_CASCADE, related_name="+")
    other = models.ForeignKey(Memory, on_delete=models.DB_CASCADE, related_name="+")
    similarity = models.FloatField()
    created_at = models.DateTimeField(default=timezone.now)
    # Set when the person said the two are different facts: the pair is not offered again.
    dismissed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["memory", "other"], name="memory_overlap_once_per_pair")]
        indexes = [models.Index(fields=["user", "dismissed_at"])]

    def __str__(self) -> str:
        return f"overlap of memories {self.memory_id} and {self.other_id}"


class ReadUntil(models.Model):
    """How far a periodic job has read rows that only ever grow (conversations summarised,
    a history's events): each run reads from there on (memory/read_until.py), not a day's
    or a week's worth again."""

    reader = models.CharField(max_length=32, unique=True)
    until = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.reader}: read until {self.until}"


class PrivateTextViewing(models.Model):
    """A staff member opened a person's private text in the admin (a memory, its history, a
    suggestion, an email): who, whose, what, when and why. Only staff with the permission
    below may, and only after stating why; the person sees each one on their memory page.
    Every other staff action on a person (a change, a deletion, a reset link sent) is
    recorded here too, as an action, and shown to them the same way."""

    class Kind(models.TextChoices):
        READ = "read", "read private text"
        ACTION = "action", "acted on the account"

    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.READ, db_default=Kind.READ)
    viewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.DB_SET_NULL, null=True, related_name="+")
    # Kept as written, so the record outlives the staff account.
    viewer_email = models.CharField(max_length=254)
    person = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.DB_CASCADE, related_name="private_text_viewings"
    )
    # What was read or done, by kind and id, or a right by its name ("added you to the group
    # Support"): never the person's words.
    what = models.CharField(max_length=300)
    reason = models.CharField(max_length=300)
    viewed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        permissions = [("view_private_text", "Can open a person's private text in the admin, giving a reason")]
        indexes = [models.Index(fields=["person", "-viewed_at"])]
        ordering = ["-viewed_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.what} of {self.person_id} opened by {self.viewer_email}"
