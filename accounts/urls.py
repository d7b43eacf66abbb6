from __future__ import annotations

from django.urls import path

from accounts import views

urlpatterns = [
    path("account/", views.account, name="account"),
    path("memories/", views.memories, name="memories"),
]
