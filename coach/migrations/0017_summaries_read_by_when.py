from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # Built beside a running app, which keeps writing conversations meanwhile.
    atomic = False

    dependencies = [
        ("coach", "0016_index_reads_only_what_waits"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="chatsession",
            index=models.Index(
                condition=models.Q(summarised_at__isnull=False), fields=["summarised_at"], name="session_summarised"
            ),
        ),
    ]
