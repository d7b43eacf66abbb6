from __future__ import annotations

from django import template
from django.utils.safestring import SafeString, mark_safe

from coach.rendering import render_reply

register = template.Library()


@register.filter
def reply_html(markdown: str) -> SafeString:
    """A reply as sanitised HTML (coach.rendering): safe to mark so, and only so."""
    return mark_safe(render_reply(markdown))  # noqa: S308 - the allowlist sanitiser has run
