from django.db import migrations, models

import infra.encryption


class Migration(migrations.Migration):
    dependencies = [
        ("coach", "0007_turn_attempts"),
    ]

    operations = [
        migrations.AddField(
            model_name="chatsession",
            name="prompt",
            field=infra.encryption.EncryptedTextField(blank=True, default=""),
        ),
        migrations.AddField(
            model_name="chatsession",
            name="prompt_nonce",
            field=models.CharField(blank=True, default="", max_length=32),
        ),
        migrations.AddField(
            model_name="chatsession",
            name="prompt_built_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="chatsession",
            name="prompt_day",
            field=models.DateField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="chatsession",
            name="prompt_event_id",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="chatsession",
            name="prompt_memory_tokens",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="chatsession",
            name="prompt_remembers",
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name="chatsession",
            name="prompt_due_next_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="chatsession",
            name="prompt_version",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddField(
            model_name="chatsession",
            name="prompt_builds",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="chatsession",
            name="prompt_built_because",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddField(
            model_name="chatsession",
            name="history_from_id",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="message",
            name="cached_prompt_tokens",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
    ]
