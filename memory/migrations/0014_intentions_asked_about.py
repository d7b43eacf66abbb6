from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # Built beside a running app: memories take writes meanwhile.
    atomic = False

    dependencies = [
        ("memory", "0013_upkeep_reads_only_what_is_due"),
    ]

    operations = [
        migrations.AddField(
            model_name="memory",
            name="asked_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        AddIndexConcurrently(
            model_name="memory",
            index=models.Index(
                condition=models.Q(asked_at__isnull=True, status="open", tier="prospective"),
                fields=["due_at"],
                name="memory_intentions_to_ask",
            ),
        ),
        RemoveIndexConcurrently(model_name="memory", name="memory_open_intentions"),
    ]
