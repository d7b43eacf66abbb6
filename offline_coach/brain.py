"""The rule-based coach: what it answers a chat completion request with. Deterministic.

Summaries, emails and weekly episodes are answered in words; a memory import with the facts
of the pasted text as JSON, one per line or bullet; a chat turn as a coach that listens
(`listening`): it looks up what bears on the message through the app's own tools, turns a
contradiction of a kept memory into a correction, notes what is new, and answers in words.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from offline_coach.documents import follow_up_email, session_summary, weekly_episode
from offline_coach.facts import pasted_facts
from offline_coach.listening import chat_turn
from offline_coach.prompt import Kind, request_kind, stated_today
from offline_coach.reply import Reply

DOCUMENTS = {
    Kind.SESSION_SUMMARY: session_summary,
    Kind.WEEKLY_EPISODE: weekly_episode,
    Kind.FOLLOW_UP_EMAIL: follow_up_email,
    Kind.MEMORY_IMPORT: pasted_facts,
}


def respond(body: dict[str, Any], *, today: date) -> Reply:
    """The coach's answer to a chat completion request; `today` unless the prompt states a date."""
    messages: list[dict[str, Any]] = body.get("messages") or []
    today = stated_today(messages) or today
    kind = request_kind(messages)
    if kind in DOCUMENTS:
        return Reply(text=DOCUMENTS[kind](messages, today=today))
    return chat_turn(body, messages, today=today)
