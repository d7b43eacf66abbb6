"""Memory keys are encrypted like the text they name, and found by a keyed digest; the
history of a memory follows its id, kept after the memory is gone.

Existing keys are encrypted in place. Keys of what the person wrote, and of protected
memories, become neutral ("allergy-1"): such a key must not repeat what was said. Events
keep the key they had, encrypted, and get the id of their memory where it still exists.
"""

from django.db import migrations, models

import infra.encryption
from infra.encryption import encrypt, lookup_digest
from memory.keys import neutral_key

USER_SOURCES = {"user", "manual", "onboarding"}
PROTECTED_CATEGORIES = {"injury", "safety", "medical", "allergy", "constraint"}


def encrypt_keys(apps, schema_editor):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, user_id, key, source, category FROM memory_memory ORDER BY user_id, id")
        rows = cursor.fetchall()
        keys_by_user: dict[int, set[str]] = {}
        for _, user_id, key, _, _ in rows:
            keys_by_user.setdefault(user_id, set()).add(key)
        renamed: dict[int, tuple[str, str]] = {}
        for memory_id, user_id, key, source, category in rows:
            new_key = key
            if source in USER_SOURCES or category in PROTECTED_CATEGORIES:
                taken = keys_by_user[user_id]
                if not (key.startswith(f"{category}-") and key[len(category) + 1 :].isdigit()):
                    new_key = neutral_key(category, taken)
                    taken.add(new_key)
            renamed[memory_id] = (key, new_key)
            cursor.execute(
                "UPDATE memory_memory SET key = %s, key_digest = %s WHERE id = %s",
                [encrypt(new_key), lookup_digest(f"memory-key:{user_id}:{new_key}"), memory_id],
            )
        # Events: the id of their memory where it is still there, and their key encrypted.
        by_old_key = {(user_id, key): memory_id for memory_id, user_id, key, _, _ in rows}
        cursor.execute("SELECT id, user_id, key, memory_id FROM memory_memoryevent")
        for event_id, user_id, key, memory_id in cursor.fetchall():
            memory_id = memory_id or by_old_key.get((user_id, key))
            shown_key = renamed[memory_id][1] if memory_id in renamed else key
            cursor.execute(
                "UPDATE memory_memoryevent SET key = %s, memory_id = %s WHERE id = %s",
                [encrypt(shown_key) if shown_key else None, memory_id, event_id],
            )


class Migration(migrations.Migration):
    dependencies = [("memory", "0004_provenance_without_chat_references")]

    operations = [
        migrations.AddField(
            model_name="memory",
            name="key_digest",
            field=models.CharField(default="", editable=False, max_length=64),
            preserve_default=False,
        ),
        migrations.RemoveConstraint(model_name="memory", name="memory_key_unique_per_user"),
        migrations.AlterField(model_name="memory", name="key", field=infra.encryption.EncryptedTextField()),
        migrations.RemoveIndex(model_name="memoryevent", name="memory_memo_user_id_6110fb_idx"),
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.AlterField(
                    "memoryevent", "memory", models.BigIntegerField(null=True, blank=True, db_column="memory_id")
                ),
            ],
            state_operations=[
                migrations.RemoveField("memoryevent", "memory"),
                migrations.AddField("memoryevent", "memory_id", models.BigIntegerField(null=True, blank=True)),
            ],
        ),
        migrations.AlterField(
            model_name="memoryevent",
            name="key",
            field=infra.encryption.EncryptedTextField(blank=True, null=True),
        ),
        migrations.RunPython(encrypt_keys, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="memory",
            constraint=models.UniqueConstraint(fields=("user", "key_digest"), name="memory_key_digest_unique_per_user"),
        ),
        migrations.AddIndex(
            model_name="memoryevent",
            index=models.Index(fields=["user", "memory_id", "created_at"], name="memory_event_history"),
        ),
    ]
