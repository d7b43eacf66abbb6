from django.apps import AppConfig


class CoachConfig(AppConfig):
    name = "coach"
    # The admin's section title, in the words support staff use.
    verbose_name = "Conversations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Load the Celery app with Django, so every `.delay()` goes to the configured broker.
        # (Not in coach/__init__.py: the run and test commands import coach without Django.)
        from coach.wiring import celery  # noqa: F401
