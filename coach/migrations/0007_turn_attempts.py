from django.db import migrations, models
from django.db.models import F


def waiting_since_written(apps, schema_editor):
    # Every person's message waited from when it was written, until now that it says so.
    Message = apps.get_model("coach", "Message")
    Message.objects.filter(role="user").update(waiting_since=F("created_at"))


class Migration(migrations.Migration):
    dependencies = [
        ("coach", "0006_reply_token_usage"),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="waiting_since",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="message",
            name="attempt",
            field=models.UUIDField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="message",
            name="claimed_by",
            field=models.CharField(blank=True, default="", max_length=200),
        ),
        migrations.AddField(
            model_name="message",
            name="heartbeat_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(waiting_since_written, migrations.RunPython.noop),
    ]
