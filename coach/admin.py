"""Sessions and messages in the admin: who and when, never what was said in the lists."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from django.contrib import admin
from django.db.models import Count, QuerySet, Sum
from django.http import HttpRequest

from coach.models import ChatSession, ConversationEmbedding, Message
from infra.admin import ModelAdmin, ReadOnlyAdmin, SupportSearch
from memory.staff_audit import StaffActionAudit

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


class _Costs(TypedDict):
    message_total: int
    # None for a session none of whose replies were counted yet.
    prompt_tokens: int | None
    cached_prompt_tokens: int | None
    completion_tokens: int | None


type _CostedSession = WithAnnotations[ChatSession, _Costs]

# How often its prompt was assembled and why last, never the prompt: it quotes memories.
_SESSION_FIELDS = (
    "user",
    "remembered",
    "temporary",
    "created_at",
    "updated_at",
    "ended_at",
    "prompt_builds",
    "prompt_built_because",
)
_MESSAGE_FIELDS = (
    "session",
    "role",
    "status",
    "error",
    "created_at",
    "prompt_tokens",
    "cached_prompt_tokens",
    "completion_tokens",
    "tokens_estimated",
)


@admin.register(ChatSession)
class ChatSessionAdmin(SupportSearch[ChatSession], StaffActionAudit, ModelAdmin[ChatSession]):
    list_display = [
        "pk",
        "user",
        "created_at",
        "updated_at",
        "ended_at",
        "remembered",
        "message_count",
        "prompt_token_total",
        "cached_token_total",
        "completion_token_total",
        "prompt_builds",
    ]
    list_filter = [("ended_at", admin.EmptyFieldListFilter), "remembered", "temporary"]
    search_fields = ["user__email"]
    list_select_related = ["user"]
    fields = readonly_fields = _SESSION_FIELDS

    def get_queryset(self, request: HttpRequest) -> QuerySet[_CostedSession]:
        # What the session's replies cost, memory rounds included: what an operator weighs.
        return (
            super()
            .get_queryset(request)
            .annotate(
                message_total=Count("messages"),
                prompt_tokens=Sum("messages__prompt_tokens"),
                cached_prompt_tokens=Sum("messages__cached_prompt_tokens"),
                completion_tokens=Sum("messages__completion_tokens"),
            )
        )

    @admin.display(description="messages", ordering="message_total")
    def message_count(self, session: _CostedSession) -> int:
        return session.message_total

    @admin.display(description="prompt tokens", ordering="prompt_tokens")
    def prompt_token_total(self, session: _CostedSession) -> int:
        return session.prompt_tokens or 0

    @admin.display(description="of which cached", ordering="cached_prompt_tokens")
    def cached_token_total(self, session: _CostedSession) -> int:
        return session.cached_prompt_tokens or 0

    @admin.display(description="completion tokens", ordering="completion_tokens")
    def completion_token_total(self, session: _CostedSession) -> int:
        return session.completion_tokens or 0


@admin.register(Message)
class MessageAdmin(SupportSearch[Message], StaffActionAudit, ModelAdmin[Message]):
    # What people wrote stays out of the admin: who, when and how it went, not the words.
    list_display = [
        "pk",
        "session",
        "session_user",
        "role",
        "status",
        "created_at",
        "prompt_tokens",
        "cached_prompt_tokens",
        "completion_tokens",
        "tokens_estimated",
    ]
    list_filter = ["role", "status", "tokens_estimated"]
    search_fields = ["session__user__email"]
    person_path = "session__user"
    list_select_related = ["session__user"]
    fields = readonly_fields = _MESSAGE_FIELDS

    @admin.display(description="user", ordering="session__user__email")
    def session_user(self, message: Message) -> str:
        return message.session.user.email

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(ConversationEmbedding)
class ConversationEmbeddingAdmin(SupportSearch[ConversationEmbedding], ReadOnlyAdmin[ConversationEmbedding]):
    # What the look-back can find, and by which model: never the vector, nor the words.
    list_display = ["pk", "user", "session", "kind", "message", "embedding_model", "embedded_at"]
    list_filter = ["kind", "embedding_model"]
    search_fields = ["user__email"]
    list_select_related = ["user"]
    fields = ["user", "session", "kind", "message", "reply", "embedding_model", "text_at", "embedded_at"]
    readonly_fields = ["user", "session", "kind", "message", "reply", "embedding_model", "text_at", "embedded_at"]
