"""Development mail: each email printed as a person would read it.

Django's console backend prints the raw MIME message, where quoted-printable encoding
breaks long links across lines with '=' (a sign-up confirmation link cannot be copied).
This one prints the headers that matter and the plain-text body as it is.
"""

from __future__ import annotations

from django.core.mail import EmailMessage
from django.core.mail.backends.console import EmailBackend


class ReadableConsoleBackend(EmailBackend):
    def write_message(self, message: EmailMessage) -> None:
        lines = [
            f"From: {message.from_email}",
            f"To: {', '.join(message.to)}",
            f"Subject: {message.subject}",
            *(f"{name}: {value}" for name, value in message.extra_headers.items()),
            "",
            str(message.body),
            "-" * 79,
        ]
        self.stream.write("\n".join(lines) + "\n")
