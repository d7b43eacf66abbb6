from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models

# An intention asked about by a check-in already is marked so; everyone who may be due a
# nudge is looked at by the next planning tick (a time before any: LOOK_AT_NEXT_TICK),
# which works out when each one is due.
DUE_LISTS_FILLED = """
UPDATE memory_memory m SET asked_at = e.created_at
FROM emails_email e
WHERE e.memory_id = m.id AND e.kind = 'check_in' AND m.asked_at IS NULL;
UPDATE emails_emailpreference SET nudge_due_at = '2000-01-01T00:00:00Z'
WHERE frequency IN ('weekly', 'twice_weekly') AND unsubscribed_at IS NULL;
"""


class Migration(migrations.Migration):
    # The indexes are built beside a running app, which keeps writing meanwhile.
    atomic = False

    dependencies = [
        ("emails", "0008_claims_beat_and_account_mail_sent_once"),
        ("memory", "0014_intentions_asked_about"),
    ]

    operations = [
        migrations.AddField(
            model_name="emailpreference",
            name="nudge_due_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunSQL(DUE_LISTS_FILLED, reverse_sql=migrations.RunSQL.noop),
        AddIndexConcurrently(
            model_name="emailpreference",
            index=models.Index(
                condition=models.Q(nudge_due_at__isnull=False), fields=["nudge_due_at"], name="email_nudge_due"
            ),
        ),
        AddIndexConcurrently(
            model_name="weeklyepisoderequest",
            index=models.Index(
                condition=models.Q(done_at__isnull=True), fields=["next_ask_at"], name="episode_week_undone"
            ),
        ),
        AddIndexConcurrently(
            model_name="outgoingmail",
            index=models.Index(
                condition=models.Q(status__in=["drafting", "sending"]), fields=["claimed_at"], name="outgoing_mail_held"
            ),
        ),
    ]
