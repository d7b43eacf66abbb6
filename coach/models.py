"""Chat sessions and their messages. Message text is encrypted at rest."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from memory.encryption import EncryptedTextField


class ChatSession(models.Model):
    # Cascades in the database, like memories (see memory.models.Memory.user).
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.DB_CASCADE, related_name="chat_sessions")
    title = EncryptedTextField(blank=True, default="")
    summary = EncryptedTextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["user", "-updated_at"])]

    def __str__(self) -> str:
        return f"session {self.pk} of {self.user_id}"


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"

    session = models.ForeignKey(ChatSession, on_delete=models.DB_CASCADE, related_name="messages")
    role = models.CharField(max_length=16, choices=Role.choices)
    content = EncryptedTextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["session", "created_at"])]

    def __str__(self) -> str:
        return f"{self.role} message {self.pk}"
