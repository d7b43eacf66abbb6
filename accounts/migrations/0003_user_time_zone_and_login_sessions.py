"""The person's time zone moves onto their account, and login sessions know their owner.

Sessions move from Django's own table to accounts_login_session, which points at the user
(so erasing a person ends their logins in the same statement). The old table's rows are
removed: the new engine never reads them, and they would outlive the people they name.
Everyone signs in once more after this migration.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def forget_old_sessions(apps, schema_editor):
    apps.get_model("sessions", "Session").objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0002_user_onboarded_at"),
        ("sessions", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="user",
            name="time_zone",
            field=models.CharField(default="UTC", max_length=64),
        ),
        migrations.CreateModel(
            name="LoginSession",
            fields=[
                (
                    "session_key",
                    models.CharField(max_length=40, primary_key=True, serialize=False, verbose_name="session key"),
                ),
                ("session_data", models.TextField(verbose_name="session data")),
                ("expire_date", models.DateTimeField(db_index=True, verbose_name="expire date")),
                (
                    "user",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.DB_CASCADE,
                        related_name="login_sessions",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={"db_table": "accounts_login_session"},
        ),
        migrations.RunPython(forget_old_sessions, migrations.RunPython.noop),
    ]
