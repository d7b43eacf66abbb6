from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # Built beside a running app: memories and their history take writes meanwhile.
    atomic = False

    dependencies = [
        ("memory", "0012_staff_actions_name_rights"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="memory",
            index=models.Index(condition=models.Q(embedding__isnull=True), fields=["id"], name="memory_unembedded"),
        ),
        AddIndexConcurrently(
            model_name="memory",
            index=models.Index(fields=["embedding_model"], name="memory_embedding_model"),
        ),
        AddIndexConcurrently(
            model_name="memoryevent",
            index=models.Index(
                condition=models.Q(action="evicted", before__isnull=False),
                fields=["created_at"],
                name="memory_event_forgotten_text",
            ),
        ),
        AddIndexConcurrently(
            model_name="memoryevent",
            index=models.Index(fields=["created_at"], name="memory_event_when"),
        ),
    ]
