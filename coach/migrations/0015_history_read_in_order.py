from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # Built beside a running app: the messages table takes writes while its index is made.
    atomic = False

    dependencies = [
        ("coach", "0014_earlier_answers"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="message",
            index=models.Index(fields=["session", "id"], name="message_in_order"),
        ),
    ]
