from __future__ import annotations

from django.urls import path

from accounts.views import account, conversations, imports, memories, memory_settings, onboarding, suggestions

urlpatterns = [
    path("welcome/", onboarding.onboarding, name="onboarding"),
    path("account/", account.account, name="account"),
    path("account/email-preferences", account.email_preferences, name="email_preferences"),
    path("account/emails/resume", account.email_resume, name="email_resume"),
    path("account/memory", memory_settings.memory_setting, name="memory_setting"),
    path("account/export/start", account.account_export_start, name="account_export_start"),
    path("account/export", account.account_export, name="account_export"),
    path("account/delete-memories", account.memories_delete_all, name="memories_delete_all"),
    path("account/delete", account.account_delete_view, name="account_delete"),
    path("memories/", memories.memories, name="memories"),
    path("memories/add", memories.memory_add, name="memory_add"),
    path("memories/import", imports.memory_import, name="memory_import"),
    path("memories/import/save", imports.memory_import_save, name="memory_import_save"),
    # The undo token travels in the body, never in the URL: URLs end up in logs.
    path("memories/undo-delete", memories.memory_undo_delete_view, name="memory_undo_delete"),
    path("memories/context", memories.memories_context, name="memories_context"),
    path("memories/proposals/<int:pk>/confirm", suggestions.proposal_confirm_view, name="proposal_confirm"),
    path("memories/proposals/<int:pk>/reject", suggestions.proposal_reject_view, name="proposal_reject"),
    path("memories/overlaps/<int:pk>/merge", suggestions.overlap_merge_view, name="overlap_merge"),
    path("memories/overlaps/<int:pk>/dismiss", suggestions.overlap_dismiss_view, name="overlap_dismiss"),
    path("memories/forgotten/", memories.memories_forgotten, name="memories_forgotten"),
    path("chat/<int:pk>/delete", conversations.conversation_delete, name="session_delete"),
    path(
        "memories/conversations/<int:pk>/delete-summary",
        conversations.conversation_summary_delete,
        name="conversation_summary_delete",
    ),
    path("memories/forgotten/<int:pk>/restore", memories.memory_restore_view, name="memory_restore"),
    # By id, never by key: a key can say what the memory says, and URLs end up in logs.
    # Another person's id is simply not found.
    path("memories/<int:pk>/", memories.memory_detail, name="memory_detail"),
    path("memories/<int:pk>/history", memories.memory_history, name="memory_history"),
    path("memories/<int:pk>/edit", memories.memory_edit, name="memory_edit"),
    path("memories/<int:pk>/delete", memories.memory_delete_view, name="memory_delete"),
    path("memories/<int:pk>/keep", memories.memory_keep_view, name="memory_keep"),
]
