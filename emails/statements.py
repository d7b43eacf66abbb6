"""The one read of the emails app on the chat's hot path, written as SQL (infra/rows.py
says why): the emails a prompt quotes, read by every turn. As SQL, 1.3 ms; by the ORM,
2.6 ms (bench/statements.py). emails/selectors.py says what it means."""

from __future__ import annotations

from functools import cache

from django.db import connection
from psycopg import sql

from emails.models import WENT_OUT, Email
from infra.rows import columns, from_row, table, text

# What a prompt quotes of an email: its kind, subject, first line and date. The rest (the
# HTML, the embedding, the sending's bookkeeping) is neither read nor decrypted.
QUOTED = ("id", "kind", "subject", "body_text", "sent_at", "created_at")
NOT_QUOTED = tuple(field.name for field in Email._meta.concrete_fields if field.name not in QUOTED)


def emails_sent_lately(*, user_id: int, limit: int) -> list[Email]:
    """The person's last `limit` emails that went out, newest first, with only what is
    quoted (one sent-unconfirmed counts: the server most likely delivered it)."""
    with connection.cursor() as cursor:
        cursor.execute(_sent_lately_sql(), {"user_id": user_id, "went_out": list(WENT_OUT), "limit": limit})
        return [from_row(Email, row, without=NOT_QUOTED) for row in cursor.fetchall()]


@cache
def _sent_lately_sql() -> str:
    # The order of emails_sent_to_user, tie-breaks included.
    return text(
        sql.SQL(
            """SELECT {quoted} FROM {emails} e WHERE e.user_id = %(user_id)s AND e.status = ANY(%(went_out)s)
            ORDER BY e.sent_at DESC, e.created_at DESC, e.id DESC LIMIT %(limit)s"""
        ).format(quoted=columns(Email, "e", without=NOT_QUOTED), emails=table(Email))
    )
