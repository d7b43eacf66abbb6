from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    # The admin's section title, in the words support staff use.
    verbose_name = "People"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_out

        from accounts.admin_access import secure_the_admin

        # The admin signs in through allauth, with a second factor (accounts/admin_access.py).
        secure_the_admin()
        # Signing out leaves every temporary conversation: each is deleted (coach/temporary.py).
        user_logged_out.connect(_temporary_conversations_left, dispatch_uid="temporary-conversations-left")


def _temporary_conversations_left(sender: object, user: object = None, **_: object) -> None:
    from coach.temporary import temporary_conversations_forget_all

    user_id = getattr(user, "pk", None)
    if user_id is not None:
        temporary_conversations_forget_all(user_id=user_id)
