"""What the coach said to the person outside the chat, for the chat's own prompt.

The chat sits below the emails app (DESIGN.md section 7) and never imports it. The emails
app hands the chat its reader of the communication tier when the app starts
(`EmailsConfig.ready`), the way an upper layer passes a lower one what it needs. Without
a reader registered, the chat's prompt holds no emails.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from memory.context import SentEmail

if TYPE_CHECKING:
    from accounts.models import User

SentEmailsReader = Callable[["User"], Sequence[SentEmail]]


_reader: SentEmailsReader | None = None


def sent_emails_reader_set(reader: SentEmailsReader | None) -> None:
    """Tell the chat how to read the emails lately sent to a person (None: no emails)."""
    global _reader
    _reader = reader


def sent_emails_for(user: User) -> Sequence[SentEmail]:
    """The emails lately sent to `user`, newest first, as the prompt quotes them."""
    return _reader(user) if _reader is not None else ()
