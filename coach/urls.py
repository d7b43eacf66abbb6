from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from coach import views

urlpatterns = [
    path("", views.chat, name="chat"),
    path("healthz", views.healthz, name="healthz"),
    path("accounts/", include("allauth.urls")),
    path("", include("accounts.urls")),
    path("admin/", admin.site.urls),
]
