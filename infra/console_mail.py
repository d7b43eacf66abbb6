"""Development mail: each email printed as a person would read it, easy to find.

Django's console backend prints the raw MIME message, where quoted-printable encoding
breaks long links across lines with '=' (a sign-up confirmation link cannot be copied).
This one prints the headers that matter and the plain-text body as it is, framed, with the
mail's links listed last, each alone on its line: the sign-up link is what a newcomer
running the app looks for in the console.
"""

from __future__ import annotations

import re

from django.core.mail import EmailMessage
from django.core.mail.backends.console import EmailBackend

LINK = re.compile(r"https?://[^\s<>\"']+")
FRAME = "=" * 79


def links_in(text: str) -> list[str]:
    """Each link of `text` once, in order, without the punctuation of the sentence around it."""
    return list(dict.fromkeys(link.rstrip(".,;:!?)") for link in LINK.findall(text)))


class ReadableConsoleBackend(EmailBackend):
    def write_message(self, message: EmailMessage) -> None:
        body = str(message.body)
        links = links_in(body)
        lines = [
            FRAME,
            f"MAIL to {', '.join(message.to)}: {message.subject}",
            FRAME,
            f"From: {message.from_email}",
            f"To: {', '.join(message.to)}",
            f"Subject: {message.subject}",
            *(f"{name}: {value}" for name, value in message.extra_headers.items()),
            "",
            body,
            "",
            *(["Links in this mail:", *(f"  {link}" for link in links)] if links else []),
            FRAME,
        ]
        self.stream.write("\n".join(lines) + "\n")
