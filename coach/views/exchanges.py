"""One exchange as the chat page shows it: the person's message; the answer shown, the
latest or an earlier one the person paged back to; what it left in their memory; the
conversations it looked back at; and whether it may be answered anew or edited."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from coach.models import ChatSession, Message
from coach.selectors import KeptMemory, LookedBackAt, look_backs_of, memories_kept_from

if TYPE_CHECKING:
    from accounts.models import User

Status = Message.Status


@dataclass(frozen=True)
class Exchange:
    """A person's message and what became of it."""

    message: Message
    # The latest reply: whole, stopped, cut off, or none yet.
    reply: Message | None
    # What it left in the person's memory, by every answer to it.
    kept: list[KeptMemory] = field(default_factory=list)
    # The past conversations the coach looked back at to answer it.
    looked_back: list[LookedBackAt] = field(default_factory=list)
    # The answers it had before it was answered again, oldest first.
    earlier: list[Message] = field(default_factory=list)
    # The earlier answer shown in place of the latest, when the person paged back to it.
    paged_to: Message | None = None
    # The last exchange of a conversation under way: it may be answered again or edited.
    last: bool = False

    @property
    def answers(self) -> int:
        """How many answers it has had: the earlier ones and the latest (being written, too)."""
        return len(self.earlier) + 1

    @property
    def number(self) -> int:
        """Which of them is shown, counting from 1."""
        return self.earlier.index(self.paged_to) + 1 if self.paged_to in self.earlier else self.answers

    @property
    def before(self) -> Message | None:
        """The earlier answer before the one shown, if there is one."""
        return self.earlier[self.number - 2] if self.number > 1 else None

    @property
    def after(self) -> Message | None:
        """The earlier answer after the one shown; None when the next is the latest (or none is)."""
        return self.earlier[self.number] if self.number < len(self.earlier) else None

    @property
    def asked_at(self) -> str:
        """When the answer shown as the latest was asked for: a form to answer it anew says
        which answer it replaces, so a second click replaces that one only once."""
        since = self.message.waiting_since
        return since.isoformat() if since is not None else ""


def exchanges_of(
    *, user: User, session: ChatSession, messages: Sequence[Message], paged_to: int | None = None
) -> list[Exchange]:
    """The conversation's exchanges, from its messages (all of them, oldest first): the
    earlier answer `paged_to` (a reply's id) in place of its exchange's latest, if it is one."""
    replies: dict[int | None, Message] = {}
    earlier: dict[int | None, list[Message]] = {}
    for reply in messages:
        if reply.role != Message.Role.ASSISTANT:
            continue
        if reply.status == Status.REPLACED:
            earlier.setdefault(reply.reply_to_id, []).append(reply)
        else:
            replies[reply.reply_to_id] = reply
    people = [m for m in messages if m.role == Message.Role.USER]
    kept = memories_kept_from(user=user, messages=people)
    looked_back = look_backs_of(user=user, messages=people)
    last = people[-1].pk if people and session.ended_at is None else None
    return [
        _exchange(
            message,
            replies.get(message.pk),
            earlier.get(message.pk, []),
            paged_to=paged_to,
            kept=kept.get(message.pk, []),
            looked_back=looked_back.get(message.pk, []),
            last=message.pk == last,
        )
        for message in people
    ]


def exchange_as_shown(*, user: User, message: Message, paged_to: int | None = None) -> Exchange:
    """One of the person's exchanges as a page loaded now shows it (`message.session` read
    with it): the message, its latest reply (or `paged_to`, an earlier one), what it left in
    their memory and where it looked back."""
    replies = list(Message.objects.filter(reply_to=message).order_by("created_at", "pk"))
    latest = [reply for reply in replies if reply.status != Status.REPLACED]
    later = Message.objects.filter(session_id=message.session_id, role=Message.Role.USER, pk__gt=message.pk)
    return _exchange(
        message,
        latest[-1] if latest else None,
        [reply for reply in replies if reply.status == Status.REPLACED],
        paged_to=paged_to,
        kept=memories_kept_from(user=user, messages=[message]).get(message.pk, []),
        looked_back=look_backs_of(user=user, messages=[message]).get(message.pk, []),
        last=message.session.ended_at is None and not later.exists(),
    )


def _exchange(
    message: Message,
    reply: Message | None,
    earlier: list[Message],
    *,
    paged_to: int | None,
    kept: list[KeptMemory],
    looked_back: list[LookedBackAt],
    last: bool,
) -> Exchange:
    shown = next((answer for answer in earlier if answer.pk == paged_to), None)
    return Exchange(message, reply, kept, looked_back, earlier=earlier, paged_to=shown, last=last)


def paged_to_of(value: str | None) -> int | None:
    """The earlier answer a page was asked to show (`?answer=`), if the value names one at
    all; one that is no answer of the exchange shows the latest, as a stale link should."""
    return int(value) if value and value.isdigit() else None
