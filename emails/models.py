"""The communication tier: every email, recorded before it is sent, and each person's
preferences for them. Email text is encrypted at rest like memories."""

from __future__ import annotations

from datetime import time

from django.conf import settings
from django.db import models
from django.utils import timezone
from pgvector.django import VectorField

from memory.encryption import EncryptedTextField


class EmailPreference(models.Model):
    class Frequency(models.TextChoices):
        OFF = "off", "Off"
        WEEKLY = "weekly", "Weekly"
        TWICE_WEEKLY = "twice_weekly", "Twice a week"

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.DB_CASCADE, related_name="email_preference")
    frequency = models.CharField(max_length=16, choices=Frequency.choices, default=Frequency.WEEKLY)
    session_summaries = models.BooleanField(default=False, help_text="A short recap by email after each session.")
    quiet_start = models.TimeField(default=time(21, 0), help_text="No email from this local time...")
    quiet_end = models.TimeField(default=time(8, 0), help_text="...until this one (may cross midnight).")
    time_zone = models.CharField(max_length=64, default="UTC")
    unsubscribed_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"email preferences of {self.user_id}"


class Email(models.Model):
    """One row per email, created before sending; (user, kind, period_key) is unique, so a
    retried task, a second worker or a repeated beat tick can never send it twice."""

    class Kind(models.TextChoices):
        NUDGE = "nudge", "Nudge"
        CHECK_IN = "check_in", "Check-in"
        SESSION_SUMMARY = "session_summary", "Session summary"

    class Status(models.TextChoices):
        QUEUED = "queued"
        SENDING = "sending"
        SENT = "sent"
        FAILED = "failed"
        SKIPPED = "skipped"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.DB_CASCADE, related_name="emails")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    period_key = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    subject = EncryptedTextField(blank=True, default="")
    body_text = EncryptedTextField(blank=True, default="")
    body_html = EncryptedTextField(blank=True, default="")
    # Compared with the last emails' embeddings, so no two read alike.
    embedding = VectorField(null=True, blank=True)
    embedding_model = models.CharField(max_length=100, blank=True)
    memory = models.ForeignKey("memory.Memory", on_delete=models.DB_SET_NULL, null=True, blank=True)
    session = models.ForeignKey("coach.ChatSession", on_delete=models.DB_SET_NULL, null=True, blank=True)
    send_after = models.DateTimeField(default=timezone.now)
    provider_message_id = models.CharField(max_length=255, blank=True)
    attempts = models.PositiveIntegerField(default=0)
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
