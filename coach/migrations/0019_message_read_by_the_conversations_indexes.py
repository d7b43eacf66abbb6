# The conversation's own indexes (message_in_order and the rest) lead with its id: a lone
# index on it only let the planner read a whole conversation and sort it.
from django.db import migrations, models

# Django's name for the index a foreign key gets (coach/migrations/0001_initial.py made it).
SESSION_INDEX = "coach_message_session_id_b328524a"


class Migration(migrations.Migration):
    # Dropped beside a running app: a plain AlterField would drop and re-add the foreign key
    # too, locking messages and conversations while it checked every message again.
    atomic = False

    dependencies = [
        ("coach", "0018_temporary_conversations"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="message",
                    name="session",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=models.DB_CASCADE,
                        related_name="messages",
                        to="coach.chatsession",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX CONCURRENTLY IF EXISTS "{SESSION_INDEX}"',
                    reverse_sql=f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{SESSION_INDEX}" ON "coach_message" ("session_id")',
                ),
            ],
        ),
    ]
