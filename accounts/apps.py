from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from accounts.admin_access import secure_the_admin

        # The admin signs in through allauth, with a second factor (accounts/admin_access.py).
        secure_the_admin()
