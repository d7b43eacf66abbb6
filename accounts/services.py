"""Writes the account page makes that belong to no other app: erasing the account.

Memory writes (add, edit, delete, restore, delete all) are memory.services'; email
preferences are emails.services' (they live beside the ledger the send task reads).
"""

from __future__ import annotations

from django.db import transaction

from accounts.models import User


def account_delete(*, user: User) -> None:
    """Erase the person and every row about them.

    Memories, their events and proposals, chat sessions and messages, emails and email
    preferences cascade in the database itself; allauth's rows (email addresses and their
    confirmations) and the admin log cascade in Django's collector. One transaction: either
    all of it goes or none of it does.
    """
    with transaction.atomic():
        User.objects.filter(pk=user.pk).delete()
