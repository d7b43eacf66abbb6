"""No column outside the encrypted ones holds a person's words (SECURITY.md, DESIGN.md
section 8). After a run through each path that takes what a person writes (a chat turn
whose coach saves a memory, a memory added and edited, an import, an email redrafted and
skipped as too like an earlier one, refusals), every text column of every table is read
raw, as a `pg_dump` would show it: encrypted columns hold Fernet tokens, and no other
column holds a phrase the person wrote."""

from __future__ import annotations

import uuid

import pytest
from django.apps import apps
from django.db import connection
from django.test import Client
from psycopg import sql

from accounts.models import User
from emails.sending import SendOutcome, email_send
from infra.encryption import EncryptedTextField
from offline_coach import ModelServer
from tests.accounts.test_memory_import import review_form
from tests.asgi_server import asgi_app_server
from tests.emails.factories import make_email, reachable_now
from tests.memory.test_privacy import Browser, _wait_until_answered

pytestmark = pytest.mark.django_db(transaction=True)

# Words no table, column or random token spells, one per path.
CHAT, MEMORY, IMPORT, EMAIL, REFUSED = "qzchatword", "qzmemoryword", "qzimportword", "qzemailword", "qzrefusedword"
EARLIER = f"Subject: Your {EMAIL} plan\n\nHi Ada,\n\nHow did the {EMAIL} go on Sunday?\n\nTalk soon,\nYour coach"
TEXT_TYPES = ("text", "character varying", "jsonb", "json")


def test_no_column_but_the_encrypted_ones_holds_what_the_person_wrote(user: User, model_server: ModelServer) -> None:
    save = {"key": "knee", "tier": "profile", "category": "other", "summary": f"Knee: {CHAT}", "content": CHAT}
    model_server.queue_tool_calls([("save_memory", {**save, "due_at": None, "keep_separate": None})])
    model_server.queue_text(f"Noted about the {CHAT}.")
    with asgi_app_server() as base:
        browser = Browser(base, user)
        browser.post("/chat/new", {"text": f"My knee hurts, {CHAT}", "client_id": str(uuid.uuid4())})
        _wait_until_answered(user)
        browser.post("/memories/add", {"summary": f"Likes {MEMORY}", "tier": "profile", "category": "preference"})

    client = Client()
    client.force_login(user)
    fields = review_form(client.post("/memories/import", {"text": f"- Enjoys {IMPORT} on weekends\n- Runs"})).fields
    client.post("/memories/import/save", fields)
    client.post("/welcome/", {"goals": f"Again {REFUSED}"})  # refused: onboarding is done

    reachable_now(user)
    earlier = make_email(user, period_key="2026-W47", status="sent", subject=f"Your {EMAIL} plan", body=EARLIER)
    model_server.queue_text(EARLIER)
    model_server.queue_text(EARLIER)
    assert email_send(email_id=make_email(user).pk) == SendOutcome.SKIPPED, f"too like email {earlier.pk}"

    encrypted, found = raw_text_columns()
    assert len(encrypted) > 20, "the encrypted columns were read too"
    for place, value in encrypted:
        assert value == "" or value.startswith("gAAAAA"), f"{place} holds no Fernet token"
    for place, value in found:
        for word in (CHAT, MEMORY, IMPORT, EMAIL, REFUSED):
            assert word not in value.lower(), f"{word!r} is in {place} in the clear"


def raw_text_columns() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(encrypted, other): each non-empty text value of every table, named table.column."""
    fernet = {
        (model._meta.db_table, field.column)
        for model in apps.get_models()
        for field in model._meta.concrete_fields
        if isinstance(field, EncryptedTextField)
    }
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND data_type = ANY(%s)",
            [list(TEXT_TYPES)],
        )
        columns = cursor.fetchall()
        encrypted: list[tuple[str, str]] = []
        other: list[tuple[str, str]] = []
        for table, column in columns:
            query = sql.SQL("SELECT {}::text FROM {} WHERE {} IS NOT NULL").format(
                sql.Identifier(column), sql.Identifier(table), sql.Identifier(column)
            )
            cursor.execute(query)
            values = [(f"{table}.{column}", row[0]) for row in cursor.fetchall() if row[0]]
            (encrypted if (table, column) in fernet else other).extend(values)
    return encrypted, other
