"""The person's memory switch: whether their coach reads and writes memories at all.

Off, the coach neither reads nor writes memories: a turn's request carries no memory
block and no memory tools, no conversation is summarised, no weekly episode is written,
and no follow-up email is sent (each is drawn from what the coach remembers). The
memories themselves stay, to see and edit on the memory page, and are used again as soon
as it is back on.
"""

from __future__ import annotations

from django import forms

from accounts.models import User
from emails.preferences import nudges_reconsider

ON, OFF = "on", "off"


class MemorySettingForm(forms.Form):
    # The radios are written out in templates/accounts/memory_setting.html.
    memory = forms.ChoiceField(
        choices=[(ON, "On"), (OFF, "Off")],
        error_messages={
            "required": "Choose on or off: nothing was changed.",
            "invalid_choice": "Choose on or off: nothing was changed.",
        },
    )

    @property
    def enabled(self) -> bool:
        chosen: str = self.cleaned_data["memory"]
        return chosen == ON


def user_memory_set(*, user: User, enabled: bool) -> bool:
    """Turn the person's memory on or off, from their next turn on. Their memories are not
    touched either way. Whether it changed."""
    changed = User.objects.filter(pk=user.pk).exclude(memory_enabled=enabled).update(memory_enabled=enabled)
    user.memory_enabled = enabled
    if changed and enabled:
        # Nudges draw on memory, so none came while it was off.
        nudges_reconsider(user=user)
    return changed == 1
