"""Email preferences and, later, sending. Other apps ask here rather than write the tables."""

from __future__ import annotations

from zoneinfo import available_timezones

from accounts.models import User
from emails.models import EmailPreference


def email_preferences_for(*, user: User) -> EmailPreference:
    """The person's preferences, made with the defaults the first time they are needed."""
    preference, _ = EmailPreference.objects.get_or_create(user=user)
    return preference


def email_time_zone_set(*, user: User, time_zone: str) -> bool:
    """Use the browser's time zone for quiet hours; ignored unless it is a real zone name."""
    if time_zone not in available_timezones():
        return False
    EmailPreference.objects.update_or_create(user=user, defaults={"time_zone": time_zone})
    return True
