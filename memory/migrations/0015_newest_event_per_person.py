import django.db.models.deletion
from django.conf import settings
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # Built beside a running app, which keeps writing history meanwhile; the plain index on
    # the person goes once the one that begins with them and goes on with the event is made.
    atomic = False

    dependencies = [
        ("memory", "0014_intentions_asked_about"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="memoryevent",
            index=models.Index(fields=["user", "id"], name="memory_event_newest"),
        ),
        migrations.AlterField(
            model_name="memoryevent",
            name="user",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.DB_CASCADE,
                related_name="memory_events",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
    ]
