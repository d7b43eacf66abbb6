from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("coach", "0017_summaries_read_by_when"),
    ]

    operations = [
        migrations.AddField(
            model_name="chatsession",
            name="temporary",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AddField(
            model_name="chatsession",
            name="left_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="chatsession",
            index=models.Index(condition=models.Q(("temporary", True)), fields=["left_at"], name="session_temporary"),
        ),
    ]
