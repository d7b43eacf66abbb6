"""The one read of the emails app on the chat's hot path, written as SQL (infra/sql_rows.py
says why): the emails a prompt quotes. emails/selectors.py says what it means."""

from __future__ import annotations

from functools import cache

from django.db import connection

from emails.models import Email
from infra.sql_rows import column_list, from_row

# What a prompt quotes of an email: its kind, subject, first line and date. The rest (the
# HTML, the embedding, the sending's bookkeeping) is neither read nor decrypted.
QUOTED = ("id", "kind", "subject", "body_text", "sent_at", "created_at")
NOT_QUOTED = tuple(field.name for field in Email._meta.concrete_fields if field.name not in QUOTED)


def emails_sent_lately(*, user_id: int, limit: int) -> list[Email]:
    """The person's last `limit` sent emails, newest first, with only what is quoted."""
    with connection.cursor() as cursor:
        cursor.execute(_emails_sent_lately_sql(), [user_id, Email.Status.SENT, limit])
        return [from_row(Email, row, without=NOT_QUOTED) for row in cursor.fetchall()]


@cache
def _emails_sent_lately_sql() -> str:
    # The order of emails_sent_to_user, tie-breaks included.
    return f"""
        SELECT {column_list(Email, "e", without=NOT_QUOTED)} FROM {Email._meta.db_table} e
        WHERE e.user_id = %s AND e.status = %s
        ORDER BY e.sent_at DESC, e.created_at DESC, e.id DESC
        LIMIT %s
    """  # noqa: S608 (names from the models, values as parameters)
