from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from coach.views import answer_anew, health, help_page, model_help, pages, streams, temporary

urlpatterns = [
    path("", pages.chat, name="chat"),
    path("chat/new", pages.session_new, name="session_new"),
    path("chat/<int:pk>/", pages.session_page, name="session"),
    path("chat/<int:pk>/events", streams.session_events, name="session_events"),
    path("chat/<int:pk>/messages", pages.message_send, name="message_send"),
    path("chat/<int:pk>/messages/<int:message_pk>/", pages.exchange, name="exchange"),
    path("chat/<int:pk>/messages/<int:message_pk>/reply", streams.reply_stream, name="reply_stream"),
    path("chat/<int:pk>/messages/<int:message_pk>/retry", pages.reply_retry, name="reply_retry"),
    path("chat/<int:pk>/messages/<int:message_pk>/stop", pages.reply_stop, name="reply_stop"),
    path("chat/<int:pk>/messages/<int:message_pk>/continue", pages.reply_continue, name="reply_continue"),
    path(
        "chat/<int:pk>/messages/<int:message_pk>/regenerate",
        answer_anew.message_regenerate_view,
        name="message_regenerate",
    ),
    path("chat/<int:pk>/messages/<int:message_pk>/edit", answer_anew.message_edit_view, name="message_edit"),
    path("chat/<int:pk>/end", pages.session_close, name="session_end"),
    path("chat/<int:pk>/left", temporary.conversation_left, name="session_left"),
    path("help/", help_page.help_page, name="help"),
    path("help/model", model_help.model_help, name="model_help"),
    path("healthz", health.healthz, name="healthz"),
    path("livez", health.livez, name="livez"),
    path("accounts/", include("allauth.urls")),
    # String includes: the project wiring names each app's URLs without importing them.
    path("", include("accounts.urls")),
    path("", include("emails.urls")),
    path("admin/", admin.site.urls),
]
