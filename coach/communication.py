"""What the coach said to the person outside the chat, for the chat's own prompt.

The chat sits below the emails app (DESIGN.md section 7) and never imports it. The emails
app hands the chat its reader of the communication tier when the app starts
(`EmailsConfig.ready`), the way an upper layer passes a lower one what it needs. Without
a reader registered, the chat's prompt holds no emails.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memory.context import SentEmail

if TYPE_CHECKING:
    from accounts.models import User

SentEmailsReader = Callable[["User"], Sequence[SentEmail]]


@dataclass(frozen=True, eq=False)
class SentEmailsPart:
    """The same read as a part of another statement (a turn's claim, coach/statements.py).
    Equal only to itself: the statement built with it is kept by it."""

    # The read for the person whose id the SQL it is given names: its rows hold `newest`
    # (1 for the last sent), then `width` columns; values as named `parameters`.
    select: Callable[[str], str]
    parameters: dict[str, Any]
    # Those columns, as read from the alias given.
    columns: Callable[[str], str]
    # A NULL of each of those columns' types, in order.
    nulls: str
    width: int
    # An email as the prompt quotes it, from its row's columns after `newest`.
    from_row: Callable[[Sequence[Any]], SentEmail]


_reader: SentEmailsReader | None = None
_part: SentEmailsPart | None = None


def sent_emails_reader_set(reader: SentEmailsReader | None, *, part: SentEmailsPart | None = None) -> None:
    """Tell the chat how to read the emails lately sent to a person (None: no emails), and
    how to read them within a statement of its own (None: with one of their own)."""
    global _reader, _part
    _reader, _part = reader, part


def sent_emails_for(user: User) -> Sequence[SentEmail]:
    """The emails lately sent to `user`, newest first, as the prompt quotes them."""
    return _reader(user) if _reader is not None else ()


def sent_emails_part() -> SentEmailsPart | None:
    """sent_emails_for's read as a part of another statement, if the reader gave one."""
    return _part
