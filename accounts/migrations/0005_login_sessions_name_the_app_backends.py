"""Sessions signed in before the app's own authentication backends (accounts/backends.py)
name Django's or allauth's, which are no longer listed: renamed here, so sessions signed
in before the migration stay signed in (one the previous release signs in while the
migration runs names the old backend, and is signed out once).

Sessions an async login saved before then have no owner recorded, so erasing their person
would not reach them: each is given its owner here, or deleted if that person is gone."""

from django.contrib.auth import BACKEND_SESSION_KEY, SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore
from django.db import migrations

RENAMED = {
    "django.contrib.auth.backends.ModelBackend": "accounts.backends.ModelBackend",
    "allauth.account.auth_backends.AuthenticationBackend": "accounts.backends.AuthenticationBackend",
}


def rename(apps, names: dict[str, str]) -> None:
    # Django's store decodes and signs the data as the app's does (same salt, same serializer).
    store = SessionStore()
    LoginSession = apps.get_model("accounts", "LoginSession")
    User = apps.get_model("accounts", "User")
    for session in LoginSession.objects.iterator():
        data = store.decode(session.session_data)
        owner = str(data.get(SESSION_KEY, ""))
        changed = []
        if session.user_id is None and owner.isdigit():
            if not User.objects.filter(pk=int(owner)).exists():
                session.delete()
                continue
            session.user_id = int(owner)
            changed.append("user_id")
        if data.get(BACKEND_SESSION_KEY) in names:
            data[BACKEND_SESSION_KEY] = names[data[BACKEND_SESSION_KEY]]
            session.session_data = store.encode(data)
            changed.append("session_data")
        if changed:
            session.save(update_fields=changed)


def forwards(apps, schema_editor) -> None:
    rename(apps, RENAMED)


def backwards(apps, schema_editor) -> None:
    rename(apps, {new: old for old, new in RENAMED.items()})


class Migration(migrations.Migration):
    dependencies = [("accounts", "0004_user_memory_enabled")]

    operations = [migrations.RunPython(forwards, backwards)]
