from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    # The admin's section title, in the words support staff use.
    verbose_name = "People"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from accounts.admin_access import secure_the_admin

        # The admin signs in through allauth, with a second factor (accounts/admin_access.py).
        secure_the_admin()
