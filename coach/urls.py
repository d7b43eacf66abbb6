from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from coach import views

urlpatterns = [
    path("", views.chat, name="chat"),
    path("chat/new", views.session_new, name="session_new"),
    path("chat/<int:pk>/", views.session_page, name="session"),
    path("chat/<int:pk>/messages", views.message_send, name="message_send"),
    path("chat/<int:pk>/messages/<int:message_pk>/reply", views.reply_stream, name="reply_stream"),
    path("chat/<int:pk>/messages/<int:message_pk>/retry", views.reply_retry, name="reply_retry"),
    path("chat/<int:pk>/end", views.session_close, name="session_end"),
    path("healthz", views.healthz, name="healthz"),
    path("accounts/", include("allauth.urls")),
    # String includes: the project wiring names each app's URLs without importing them.
    path("", include("accounts.urls")),
    path("", include("emails.urls")),
    path("admin/", admin.site.urls),
]
