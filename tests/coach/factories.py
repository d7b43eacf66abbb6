"""Chat sessions and messages for tests."""

from __future__ import annotations

from accounts.models import User
from coach.models import ChatSession, Message
from coach.services import message_post, session_start

# A save_memory call as the model sends it: an intention with its date.
TALK_SAVE = {
    "key": "talk-june",
    "tier": "prospective",
    "category": "goal",
    "summary": "Giving a talk in June",
    "content": "Giving a talk at the library in June",
    "due_at": "2031-06-10",
    "keep_separate": None,
}


def make_session(user: User, *messages: str) -> ChatSession:
    """A session with the given exchanges already answered: person, coach, person, coach..."""
    session = session_start(user=user)
    pending: Message | None = None
    for number, text in enumerate(messages):
        if number % 2 == 0:
            pending = message_post(session=session, text=text, client_id=None)
        else:
            assert pending is not None
            Message.objects.create(session=session, role="assistant", content=text, status="complete", reply_to=pending)
            Message.objects.filter(pk=pending.pk).update(status="answered")
    session.refresh_from_db()
    return session
