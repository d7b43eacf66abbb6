"""The one read of the emails app on the chat's hot path, written as SQL (infra/sql_rows.py
says why): the emails a prompt quotes. emails/selectors.py says what it means."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from django.db import connection

from emails.models import Email
from infra.sql_rows import column_list, from_row

# What a prompt quotes of an email: its kind, subject, first line and date. The rest (the
# HTML, the embedding, the sending's bookkeeping) is neither read nor decrypted.
QUOTED = ("id", "kind", "subject", "body_text", "sent_at", "created_at")
NOT_QUOTED = tuple(field.name for field in Email._meta.concrete_fields if field.name not in QUOTED)
# The values sent_lately_sql names: what went out (an unconfirmed email most likely arrived).
SENT_LATELY_PARAMETERS = {"email_sent": Email.Status.SENT, "email_sent_unconfirmed": Email.Status.SENT_UNCONFIRMED}


def emails_sent_lately(*, user_id: int, limit: int) -> list[Email]:
    """The person's last `limit` sent emails, newest first, with only what is quoted."""
    with connection.cursor() as cursor:
        cursor.execute(_emails_sent_lately_sql(), {**SENT_LATELY_PARAMETERS, "user_id": user_id, "emails_limit": limit})
        return [email_from_row(row[1:]) for row in cursor.fetchall()]


def sent_lately_sql(user_id: str) -> str:
    """emails_sent_lately's read for the person whose id `user_id` (SQL) gives, at most
    %(emails_limit)s of them: `newest` (1 for the last sent), then the quoted columns."""
    # The order of emails_sent_to_user, tie-breaks included.
    return f"""
        SELECT row_number() OVER (ORDER BY e.sent_at DESC, e.created_at DESC, e.id DESC) AS newest,
               {column_list(Email, "e", without=NOT_QUOTED)}
        FROM {Email._meta.db_table} e WHERE e.user_id = {user_id}
          AND e.status IN (%(email_sent)s, %(email_sent_unconfirmed)s)
        ORDER BY newest LIMIT %(emails_limit)s
    """  # noqa: S608 (names from the model and the caller's SQL, values as parameters)


def email_from_row(row: Sequence[Any]) -> Email:
    """An email from the quoted columns, the rest deferred."""
    return from_row(Email, row, without=NOT_QUOTED)


@cache
def _emails_sent_lately_sql() -> str:
    return sent_lately_sql("%(user_id)s")
