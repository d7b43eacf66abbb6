from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models

# What the look-back's index holds already is marked so; what is not waits, as it did.
MARK_INDEXED = """
UPDATE coach_message m SET indexed = true
WHERE m.role = 'user' AND m.status = 'answered' AND (
    EXISTS (SELECT 1 FROM coach_conversationembedding e WHERE e.message_id = m.id)
    OR EXISTS (SELECT 1 FROM coach_chatsession s WHERE s.id = m.session_id AND NOT s.remembered)
);
UPDATE coach_chatsession s SET summary_indexed = true
WHERE s.summarised_at IS NOT NULL AND (
    NOT s.remembered
    OR EXISTS (
        SELECT 1 FROM coach_conversationembedding e
        WHERE e.session_id = s.id AND e.kind = 'summary' AND e.text_at = s.summarised_at
    )
);
"""


class Migration(migrations.Migration):
    # The indexes are built beside a running app, which keeps writing messages meanwhile.
    atomic = False

    dependencies = [
        ("coach", "0015_history_read_in_order"),
    ]

    operations = [
        migrations.AddField(
            model_name="chatsession",
            name="summary_indexed",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AddField(
            model_name="message",
            name="indexed",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.RunSQL(MARK_INDEXED, reverse_sql=migrations.RunSQL.noop),
        AddIndexConcurrently(
            model_name="chatsession",
            index=models.Index(
                condition=models.Q(remembered=True, summarised_at__isnull=False, summary_indexed=False),
                fields=["user"],
                name="session_summary_to_index",
            ),
        ),
        AddIndexConcurrently(
            model_name="conversationembedding",
            index=models.Index(
                condition=models.Q(embedding__isnull=False),
                fields=["embedding_model"],
                name="conversation_embedding_model",
            ),
        ),
        AddIndexConcurrently(
            model_name="message",
            index=models.Index(
                condition=models.Q(indexed=False, role="user", status="answered"),
                fields=["session"],
                name="message_exchange_to_index",
            ),
        ),
    ]
