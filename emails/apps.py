from django.apps import AppConfig


class EmailsConfig(AppConfig):
    name = "emails"
    # The admin's section title, in the words support staff use.
    verbose_name = "Emails"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from coach.communication import sent_emails_reader_set
        from emails.planning import workers_set
        from emails.selectors import sent_emails_for_prompt
        from emails.tasks import WORKERS

        # The chat sits below this app and never imports it: it is handed, here, how to
        # read what the coach emailed, for its prompt's communication tier.
        sent_emails_reader_set(sent_emails_for_prompt)
        # Planning publishes tasks that call planning: the task module imports planning,
        # and planning is handed, here, how to publish them, so it never imports the tasks
        # back (no import circle).
        workers_set(WORKERS)
