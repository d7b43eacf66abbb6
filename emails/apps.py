from django.apps import AppConfig


class EmailsConfig(AppConfig):
    name = "emails"
    default_auto_field = "django.db.models.BigAutoField"
