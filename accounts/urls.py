from __future__ import annotations

from django.urls import path

from accounts import views

urlpatterns = [
    path("account/", views.account, name="account"),
    path("account/email-preferences", views.email_preferences, name="email_preferences"),
    path("account/emails/resume", views.email_resume, name="email_resume"),
    path("account/export", views.account_export, name="account_export"),
    path("account/delete-memories", views.memories_delete_all, name="memories_delete_all"),
    path("account/delete", views.account_delete_view, name="account_delete"),
    path("memories/", views.memories, name="memories"),
    path("memories/add", views.memory_add, name="memory_add"),
    path("memories/context", views.memories_context, name="memories_context"),
    path("memories/proposals/<int:pk>/confirm", views.proposal_confirm_view, name="proposal_confirm"),
    path("memories/proposals/<int:pk>/reject", views.proposal_reject_view, name="proposal_reject"),
    path("memories/forgotten/<int:pk>/restore", views.memory_restore_view, name="memory_restore"),
    # Memories are named by key, unique per person: another person's key is simply not found.
    path("memories/<slug:key>/", views.memory_detail, name="memory_detail"),
    path("memories/<slug:key>/history", views.memory_history, name="memory_history"),
    path("memories/<slug:key>/edit", views.memory_edit, name="memory_edit"),
    path("memories/<slug:key>/delete", views.memory_delete_view, name="memory_delete"),
    path("memories/<slug:key>/keep", views.memory_keep_view, name="memory_keep"),
]
