"""Re-encrypt every encrypted column, and the second-factor secrets allauth keeps in its own
table, under the newest FIELD_ENCRYPTION_KEYS key; and recompute the lookup digests (of
memory keys, of queued mail's addresses) and the hashed words searches read (of memories,
of indexed exchanges and summaries) under the current FIELD_LOOKUP_KEY."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from django.db.models import Model
from psycopg import sql

from coach.exchange_index import exchange_words_rehash
from emails.models import OutgoingMail
from emails.outbox import mail_digest
from infra.encryption import DecryptionError, EncryptedTextField, reencrypt
from infra.hashed_words import hashed_words
from infra.rows import table, text
from memory.models import Memory, key_digest


class Command(BaseCommand):
    help = (
        "Re-encrypt stored text under the first key of FIELD_ENCRYPTION_KEYS, in batches. Put the new key first, "
        "keep the old ones after it, run this, then drop the old keys. It also recomputes the lookup digests of "
        "memory keys and of queued mail's addresses, and the hashed words searches read, so run it at once after "
        "changing FIELD_LOOKUP_KEY."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--batch-size", type=int, default=500)

    def handle(self, *args: Any, batch_size: int, **options: Any) -> None:
        for model in apps.get_models():
            encrypted = [f for f in model._meta.concrete_fields if isinstance(f, EncryptedTextField)]
            columns = [f.column for f in encrypted if f.column is not None]
            if columns:
                count = self._rotate_table(model, columns, batch_size)
                self.stdout.write(f"{model._meta.label}: {count} rows re-encrypted")
        self.stdout.write(f"mfa.Authenticator: {self._rotate_second_factors()} secrets re-encrypted")
        digests, words = self._redigest(batch_size)
        self.stdout.write(f"memory.Memory: {digests} key digests recomputed, {words} memories' words hashed again")
        self.stdout.write(f"emails.OutgoingMail: {self._redigest_mail()} address digests recomputed")
        rehashed = exchange_words_rehash(batch_size=batch_size)
        self.stdout.write(f"coach.ConversationEmbedding: {rehashed} exchanges' and summaries' words hashed again")

    def _rotate_second_factors(self) -> int:
        """allauth stores each authenticator's secret (TOTP) or seed (recovery codes) in a
        JSON column, encrypted by our MFA adapter: those too move to the newest key."""
        from allauth.mfa.models import Authenticator

        done = 0
        with transaction.atomic():
            for authenticator in Authenticator.objects.select_for_update().order_by("pk"):
                data = dict(authenticator.data)
                for field in ("secret", "seed"):
                    if isinstance(data.get(field), str):
                        try:
                            data[field] = reencrypt(data[field])
                        except DecryptionError as error:
                            raise CommandError(f"mfa.Authenticator {authenticator.pk}: {error}") from None
                if data != authenticator.data:
                    Authenticator.objects.filter(pk=authenticator.pk).update(data=data)
                    done += 1
        return done

    def _redigest_mail(self) -> int:
        changed = 0
        with transaction.atomic():
            for mail in OutgoingMail.objects.select_for_update().only("pk", "to", "to_digest"):
                digest = mail_digest(mail.to)
                if digest != mail.to_digest:
                    OutgoingMail.objects.filter(pk=mail.pk).update(to_digest=digest)
                    changed += 1
        return changed

    def _redigest(self, batch_size: int) -> tuple[int, int]:
        """Each memory's key digest and hashed words under the current FIELD_LOOKUP_KEY:
        how many digests changed, and how many words."""
        digests, words, last = 0, 0, 0
        while True:
            with transaction.atomic():
                batch = list(
                    Memory.objects.select_for_update()
                    .filter(pk__gt=last)
                    .order_by("pk")
                    .only("pk", "user_id", "key", "key_digest", "summary", "content", "words")[:batch_size]
                )
                if not batch:
                    return digests, words
                for memory in batch:
                    changed: dict[str, str] = {}
                    digest = key_digest(memory.user_id, memory.key)
                    if digest != memory.key_digest:
                        changed["key_digest"] = digest
                        digests += 1
                    hashed = hashed_words(*memory.words_source())
                    if hashed != memory.words:
                        changed["words"] = hashed
                        words += 1
                    if changed:
                        Memory.objects.filter(pk=memory.pk).update(**changed)
            last = batch[-1].pk

    def _rotate_table(self, model: type[Model], columns: list[str], batch_size: int) -> int:
        select, update = _rotation_sql(model, columns)
        done, last = 0, None
        while True:
            # One short transaction a batch: rows are locked only while their batch turns over.
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(select, [last if last is not None else -1, batch_size])
                rows = cursor.fetchall()
                if not rows:
                    return done
                try:
                    values = [[None if v is None else reencrypt(v) for v in row[1:]] + [row[0]] for row in rows]
                except DecryptionError as error:
                    raise CommandError(
                        f"{model._meta.db_table}: {error}; is an old key missing from FIELD_ENCRYPTION_KEYS?"
                    ) from None
                cursor.executemany(update, values)
            done += len(rows)
            last = rows[-1][0]


def _rotation_sql(model: type[Model], columns: list[str]) -> tuple[str, str]:
    """A batch's read, its rows locked, and the write of one row: the model's table and
    primary key and the encrypted `columns` are quoted identifiers; values are parameters."""
    pk_column = model._meta.pk.column if model._meta.pk is not None else None
    if pk_column is None:
        raise CommandError(f"{model.__name__} has no primary key column to go through its rows by")
    rows, pk = table(model), sql.Identifier(pk_column)
    names = [sql.Identifier(column) for column in columns]
    select = sql.SQL("SELECT {pk}, {names} FROM {rows} WHERE {pk} > %s ORDER BY {pk} LIMIT %s FOR UPDATE").format(
        pk=pk, names=sql.SQL(", ").join(names), rows=rows
    )
    update = sql.SQL("UPDATE {rows} SET {assignments} WHERE {pk} = %s").format(
        rows=rows, assignments=sql.SQL(", ").join(sql.SQL("{} = %s").format(name) for name in names), pk=pk
    )
    return text(select), text(update)
