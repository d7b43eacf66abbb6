"""The communication tier: every email, recorded before it is sent, and each person's
preferences for them. Email text is encrypted at rest like memories."""

from __future__ import annotations

from datetime import datetime, time

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.text import Truncator
from pgvector.django import VectorField

from emails.schedule import SendingHours
from infra.encryption import EncryptedTextField

OPENING_MAX_CHARS = 120


class EmailPreference(models.Model):
    class Frequency(models.TextChoices):
        WEEKLY = "weekly", "Once a week"
        TWICE_WEEKLY = "twice_weekly", "Twice a week"
        OFF = "off", "No emails"

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.DB_CASCADE, related_name="email_preference")
    # NULL until the person chooses (in onboarding or on the account page): nobody is
    # written to on a frequency they never picked, so "not chosen" sends nothing at all.
    # NULL, not "": the planning SQL and the send task read it as a state of its own.
    frequency = models.CharField(max_length=16, choices=Frequency.choices, null=True, default=None)  # noqa: DJ001
    session_summaries = models.BooleanField(default=False, help_text="A short recap by email after each session.")
    quiet_start = models.TimeField(default=time(21, 0), help_text="No email from this local time...")
    quiet_end = models.TimeField(default=time(8, 0), help_text="...until this one (may cross midnight).")
    unsubscribed_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"email preferences of {self.user_id}"

    @property
    def chosen(self) -> bool:
        """Whether the person has said how often the coach may write (no email before)."""
        return self.frequency is not None

    @property
    def hours(self) -> SendingHours:
        """When the person may be written to, as the sending rule reads it."""
        # The person's zone is theirs (accounts.User.time_zone), not a preference of emails.
        return SendingHours(time_zone=self.user.time_zone, quiet_start=self.quiet_start, quiet_end=self.quiet_end)


class Email(models.Model):
    """One row per email, created before sending; (user, kind, period_key) is unique, so a
    retried task, a second worker or a repeated beat tick can never send it twice.

    Its life: planned `queued` (no text yet); claimed by one send task with a conditional
    UPDATE (emails/claims.py), `drafting` while the model writes it, then `sending`; then
    `sent`, `failed` (with the error) or `skipped` (with the reason: unsubscribed, too like
    an earlier email), or `queued` again, its draft kept, for a retry or the person's next
    sending time. `sent_unconfirmed`: the whole email went to the SMTP server, which never
    answered its end (a timeout, a dropped connection, a worker killed while it waited).
    The server may have delivered it, so it is never sent again, and it counts as sent
    wherever the coach recalls what it wrote.
    """

    class Kind(models.TextChoices):
        NUDGE = "nudge", "Nudge"
        CHECK_IN = "check_in", "Check-in"
        SESSION_SUMMARY = "session_summary", "Session summary"

    class Status(models.TextChoices):
        QUEUED = "queued"
        DRAFTING = "drafting"
        SENDING = "sending"
        SENT = "sent"
        SENT_UNCONFIRMED = "sent_unconfirmed", "Sent, unconfirmed"
        FAILED = "failed"
        SKIPPED = "skipped"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.DB_CASCADE, related_name="emails")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    period_key = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    # Null until the send task has the model draft it: planning inserts rows in bulk in SQL.
    subject = EncryptedTextField(null=True, blank=True)
    body_text = EncryptedTextField(null=True, blank=True)
    body_html = EncryptedTextField(null=True, blank=True)
    # Compared with the last emails' embeddings, so no two read alike.
    embedding = VectorField(null=True, blank=True)
    embedding_model = models.CharField(max_length=100, blank=True)
    memory = models.ForeignKey("memory.Memory", on_delete=models.DB_SET_NULL, null=True, blank=True)
    session = models.ForeignKey("coach.ChatSession", on_delete=models.DB_SET_NULL, null=True, blank=True)
    # While queued: when the dispatcher is next to hand it to a worker. Planning sends it
    # at once and sets this a visibility timeout ahead, so only a lost task is sent again;
    # an email kept back by quiet hours waits here for the person's next sending time.
    send_after = models.DateTimeField(default=timezone.now)
    # When a task claimed it, who did (the Celery node's name and the process: host, pid
    # and the process's start), the claim's own token, which every later step of that
    # attempt must still match, and the holder's last heartbeat, by the database's clock.
    # A claim whose holder is gone, or went silent, is handed on (emails/claims.py).
    claimed_at = models.DateTimeField(null=True, blank=True)
    # A default in the database too: planning inserts rows in SQL, naming only its columns.
    claimed_by = models.CharField(max_length=255, blank=True, db_default="")
    claim_token = models.UUIDField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # When the end of its data (the final ".") was about to go to the SMTP server: from then
    # on it may be delivered whatever else happens, so it is never sent again.
    body_sent_at = models.DateTimeField(null=True, blank=True)
    # The Message-ID we generate before sending, so a copy sent twice is recognisable.
    provider_message_id = models.CharField(max_length=255, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    # Why it failed or was skipped; the last temporary error while it is retried.
    error = models.TextField(blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "kind", "period_key"], name="email_once_per_user_kind_period")
        ]
        indexes = [
            models.Index(fields=["user", "-created_at"]),
            models.Index(fields=["status", "send_after"]),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.period_key} to {self.user_id} ({self.status})"

    @property
    def when(self) -> datetime:
        """When it was sent, or planned if it never was."""
        return self.sent_at or self.created_at

    @property
    def first_line(self) -> str:
        """What the email says after its greeting: how the last emails are quoted to the model."""
        return opening_line(self.body_text or "")


# What the coach counts as written to the person: an unconfirmed email most likely arrived.
WENT_OUT = (Email.Status.SENT, Email.Status.SENT_UNCONFIRMED)


def opening_line(body: str) -> str:
    """The first line of substance of an email's text: the one after "Hi Ada,"."""
    lines = [line.strip() for line in body.splitlines() if line.strip()]
    for line in lines:
        # A greeting is a short line of its own ending in a comma.
        if not (line.endswith(",") and len(line.split()) <= 4):
            return Truncator(line).chars(OPENING_MAX_CHARS)
    return lines[0] if lines else ""


class WeeklyEpisodeRequest(models.Model):
    """The scheduler's record of one person's week: when it was asked to be written up,
    how often, when it may be asked again, and when it was done. One per person and week.

    The hourly planner reads what is due from the data (emails/selectors.py): a week whose
    Sunday evening has come, that had a summarised session, that is not too old
    (WEEKLY_EPISODE_DUE_DAYS), and that is not done. Asking sets `next_ask_at` a growing
    pause ahead, so a write that failed, or a task that was lost, is asked for again at a
    later tick. A write claims the week before it asks the model, and marks it done once
    the episode is kept: so a week is written once, however many tasks write it at once,
    and an episode the person deleted is never written again."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.DB_CASCADE, related_name="+")
    week_key = models.CharField(max_length=16)
    created_at = models.DateTimeField(default=timezone.now)
    attempts = models.PositiveIntegerField(default=0)
    next_ask_at = models.DateTimeField(default=timezone.now)
    # While a task writes it: the others leave it alone (a claim lapses after a while).
    claimed_at = models.DateTimeField(null=True, blank=True)
    # Written (or refused for good: the store had no room the coach may take, see `error`).
    done_at = models.DateTimeField(null=True, blank=True)
    # Why the last write failed, or why a done week has no episode.
    error = models.TextField(blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "week_key"], name="episode_once_per_user_week")]

    def __str__(self) -> str:
        return f"{self.week_key} of {self.user_id}"


class OutgoingMail(models.Model):
    """Mail someone is waiting for (a sign-up confirmation, a password reset, a sign-in
    code), kept until it is sent: an SMTP outage delays it, never loses it or fails the
    page that asked for it. Deleted once sent (it holds links that sign people in).

    Sent as the follow-up emails are (emails/claims.py, emails/delivery.py): claimed
    `sending` by one sender; `sent_unconfirmed` when its whole text went to the SMTP
    server and no reply to its end came (never sent again); `failed` for good. Either way
    what it said is erased and the record of what became of it stays."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        SENDING = "sending"
        SENT_UNCONFIRMED = "sent_unconfirmed", "Sent, unconfirmed"
        FAILED = "failed"

    # Where to: encrypted like the text, and found for erasure by its keyed hash.
    to = EncryptedTextField()
    to_digest = models.CharField(max_length=64, db_index=True)
    from_email = models.CharField(max_length=320)
    subject = EncryptedTextField()
    body_text = EncryptedTextField()
    body_html = EncryptedTextField(blank=True, default="")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    attempts = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # While queued: when a sender may take it, now or after a failure's pause.
    send_after = models.DateTimeField(default=timezone.now)
    # Made when it is queued and kept: every try carries the same Message-ID.
    message_id = models.CharField(max_length=255, blank=True)
    # Its sender's claim, as an Email's (see there).
    claimed_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=255, blank=True)
    claim_token = models.UUIDField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    body_sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["send_after"], condition=models.Q(status="queued"), name="outgoing_mail_due")]

    def __str__(self) -> str:
        return f"outgoing mail {self.pk} ({self.status})"
