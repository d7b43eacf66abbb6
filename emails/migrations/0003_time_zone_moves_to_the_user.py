"""The time zone was an email preference; it is the person's own now (accounts.User).
And the scheduler records each week it asked to be written up (WeeklyEpisodeRequest)."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


def copy_time_zones(apps, schema_editor):
    User = apps.get_model("accounts", "User")
    EmailPreference = apps.get_model("emails", "EmailPreference")
    for preference in EmailPreference.objects.exclude(time_zone="UTC").only("user_id", "time_zone").iterator():
        User.objects.filter(pk=preference.user_id).update(time_zone=preference.time_zone)


def copy_back(apps, schema_editor):
    User = apps.get_model("accounts", "User")
    EmailPreference = apps.get_model("emails", "EmailPreference")
    for user in User.objects.exclude(time_zone="UTC").only("pk", "time_zone").iterator():
        EmailPreference.objects.filter(user_id=user.pk).update(time_zone=user.time_zone)


class Migration(migrations.Migration):
    dependencies = [
        ("emails", "0002_email_drafted_later_and_claimed"),
        ("accounts", "0003_user_time_zone_and_login_sessions"),
    ]

    operations = [
        migrations.RunPython(copy_time_zones, copy_back),
        migrations.RemoveField(model_name="emailpreference", name="time_zone"),
        migrations.CreateModel(
            name="WeeklyEpisodeRequest",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("week_key", models.CharField(max_length=16)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.DB_CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "constraints": [models.UniqueConstraint(fields=("user", "week_key"), name="episode_once_per_user_week")]
            },
        ),
    ]
