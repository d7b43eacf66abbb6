"""A memory's provenance (the chat session and message it came from) becomes plain ids.

The columns keep their names and values; only the foreign-key constraints to the chat's
tables go, so the memory app no longer depends on the chat app.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("memory", "0003_open_intentions_index")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.AlterField(
                    "memory", "session", models.BigIntegerField(null=True, blank=True, db_column="session_id")
                ),
                migrations.AlterField(
                    "memory", "message", models.BigIntegerField(null=True, blank=True, db_column="message_id")
                ),
            ],
            state_operations=[
                migrations.RemoveField("memory", "session"),
                migrations.RemoveField("memory", "message"),
                migrations.AddField("memory", "session_id", models.BigIntegerField(null=True, blank=True)),
                migrations.AddField("memory", "message_id", models.BigIntegerField(null=True, blank=True)),
            ],
        )
    ]
