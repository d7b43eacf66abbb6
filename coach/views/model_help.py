"""Whether the built-in demo coach answers, and the README's section on using a real model
as a page, which the chat's notice links to.

The section is read from the README each time: one text, so the page and the README
cannot drift apart. It is Markdown, rendered through the replies' allowlist.
"""

from __future__ import annotations

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from coach.rendering import render_reply

README_NAME = "README.md"
SECTION_HEADING = "## Using a real model"


def demo_coach_answers() -> bool:
    """Whether the offline coach answers: no key, and the base URL is its own (as the
    settings choose it), not another server the person pointed the app at."""
    return not settings.OPENAI_API_KEY and settings.OPENAI_BASE_URL == settings.OFFLINE_COACH_URL


def readme_section(text: str, heading: str) -> str | None:
    """The Markdown under `heading`, up to the next heading of its level; None without it."""
    lines = text.splitlines()
    if heading not in lines:
        return None
    start = lines.index(heading) + 1
    level = heading.split(" ", 1)[0] + " "
    end = next((n for n in range(start, len(lines)) if lines[n].startswith(level)), len(lines))
    return "\n".join(lines[start:end]).strip()


@require_GET
def model_help(request: HttpRequest) -> HttpResponse:
    """How to have a real model answer instead of the demo coach."""
    try:
        text = (settings.BASE_DIR / README_NAME).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise Http404("This installation has no README.") from None
    section = readme_section(text, SECTION_HEADING)
    if section is None:
        raise Http404("The README has no section on using a real model.")
    context = {"section_html": render_reply(section), "demo_coach": demo_coach_answers()}
    return render(request, "coach/model_help.html", context)
