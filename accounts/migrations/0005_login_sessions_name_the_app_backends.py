"""Sessions signed in before the app's own authentication backends (accounts/backends.py)
name Django's or allauth's, which are no longer listed: renamed here, so nobody is signed
out by the change."""

from django.contrib.auth import BACKEND_SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore
from django.db import migrations

RENAMED = {
    "django.contrib.auth.backends.ModelBackend": "accounts.backends.ModelBackend",
    "allauth.account.auth_backends.AuthenticationBackend": "accounts.backends.AuthenticationBackend",
}


def rename(apps, schema_editor, names: dict[str, str]) -> None:
    # Django's store decodes and signs the data as the app's does (same salt, same serializer).
    store = SessionStore()
    LoginSession = apps.get_model("accounts", "LoginSession")
    for session in LoginSession.objects.filter(user__isnull=False).iterator():
        data = store.decode(session.session_data)
        if data.get(BACKEND_SESSION_KEY) in names:
            data[BACKEND_SESSION_KEY] = names[data[BACKEND_SESSION_KEY]]
            session.session_data = store.encode(data)
            session.save(update_fields=["session_data"])


def forwards(apps, schema_editor) -> None:
    rename(apps, schema_editor, RENAMED)


def backwards(apps, schema_editor) -> None:
    rename(apps, schema_editor, {new: old for old, new in RENAMED.items()})


class Migration(migrations.Migration):
    dependencies = [("accounts", "0004_user_memory_enabled")]

    operations = [migrations.RunPython(forwards, backwards)]
