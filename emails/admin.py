"""The email ledger and preferences in the admin: read-only, since every row is written
by the planner and the send task (an edit by hand could send an email twice or never)."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.text import Truncator

from emails.models import Email, EmailPreference, OutgoingMail
from infra.admin import ReadOnlyAdmin, SupportSearch
from memory.admin_privacy import PrivateTextAdmin


@admin.register(Email)
class EmailAdmin(SupportSearch[Email], ReadOnlyAdmin[Email], PrivateTextAdmin[Email]):
    # The list never shows what an email said: its text is the person's, opened one at a time.
    # Why one failed, and when the next try is, read at a glance; "Sent, unconfirmed" (the
    # server never answered the end of it) is a status and a filter of its own.
    list_display = ["user", "kind", "period_key", "status", "attempts", "next_try", "why", "created_at", "sent_at"]
    list_filter = ["status", "kind"]
    search_fields = ["user__email"]
    list_select_related = ["user"]
    date_hierarchy = "created_at"
    ordering = ["-created_at", "-pk"]
    fields = [
        "user",
        "kind",
        "period_key",
        "status",
        "error",
        "memory",
        "session",
        "send_after",
        "claimed_at",
        "claimed_by",
        "heartbeat_at",
        "body_sent_at",
        "attempts",
        "provider_message_id",
        "embedding_model",
        "created_at",
        "sent_at",
        "subject",
        "body_text",
    ]
    private_fields = ("subject", "body_text")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Email]:
        # The list decrypts nothing and loads no vectors.
        return super().get_queryset(request).defer("embedding", "subject", "body_text", "body_html")

    @admin.display(description="next try", ordering="send_after")
    def next_try(self, email: Email) -> str:
        if email.status != Email.Status.QUEUED or email.send_after is None:
            return "-"
        return email.send_after.strftime("%Y-%m-%d %H:%M UTC")

    @admin.display(description="why it failed or waits")
    def why(self, email: Email) -> str:
        return Truncator(email.error).chars(90) if email.error else "-"


@admin.register(EmailPreference)
class EmailPreferenceAdmin(SupportSearch[EmailPreference], ReadOnlyAdmin[EmailPreference]):
    list_display = [
        "user",
        "frequency",
        "session_summaries",
        "quiet_start",
        "quiet_end",
        "unsubscribed_at",
    ]
    list_filter = ["frequency", "session_summaries", ("unsubscribed_at", admin.EmptyFieldListFilter)]
    search_fields = ["user__email"]
    list_select_related = ["user"]


@admin.register(OutgoingMail)
class OutgoingMailAdmin(ReadOnlyAdmin[OutgoingMail]):
    # Account mail waiting to go (a confirmation, a reset): whether it is stuck and why, and
    # who is sending it. Not to whom or what: it holds links that sign a person in.
    list_display = ["pk", "status", "attempts", "send_after", "why", "created_at"]
    list_filter = ["status"]
    fields = readonly_fields = (
        "status",
        "attempts",
        "error",
        "created_at",
        "send_after",
        "claimed_at",
        "claimed_by",
        "heartbeat_at",
        "body_sent_at",
        "message_id",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[OutgoingMail]:
        return super().get_queryset(request).defer("to", "subject", "body_text", "body_html")

    @admin.display(description="why it failed or waits")
    def why(self, mail: OutgoingMail) -> str:
        return Truncator(mail.error).chars(90) if mail.error else "-"
