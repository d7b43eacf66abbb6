from __future__ import annotations

from django.urls import path

from emails import views

urlpatterns = [
    path("emails/unsubscribe/<str:token>/", views.unsubscribe, name="email_unsubscribe"),
]
