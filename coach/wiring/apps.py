from django.apps import AppConfig


class WiringConfig(AppConfig):
    """The project's wiring as a Django app, for one thing: the Celery app loads with Django."""

    name = "coach.wiring"
    label = "wiring"

    def ready(self) -> None:
        # Loaded here, in every process Django sets up, so every `.delay()` goes to the
        # configured broker. Not in coach/wiring/__init__.py: the run and test commands
        # import this package without Django (and must not set DJANGO_SETTINGS_MODULE).
        from coach.wiring import celery  # noqa: F401
