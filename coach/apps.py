from django.apps import AppConfig


class CoachConfig(AppConfig):
    name = "coach"
    # The admin's section title, in the words support staff use.
    verbose_name = "Conversations"
    default_auto_field = "django.db.models.BigAutoField"
