"""A conversation's prompt: its system prompt assembled at its first turn and then sent byte
for byte, so that every turn's request begins with the previous turn's and every provider's
prompt cache (OpenAI's, Anthropic's, vLLM's prefix caching, llama.cpp's KV reuse) can read
it again instead of the model re-reading it (DESIGN.md section 3.3).

What changes in the person's memory meanwhile reaches the model as a dated note where it
happened (memory/notes.py). The prompt is assembled afresh, and the reason counted, only
when it must be: at the conversation's first turn; when the person corrects or deletes a
memory (their correction is never contradicted by old text in front of the model, and
deleted text is never sent again); when the conversation resumes on a later day of the
person's, or after COACH_PROMPT_GAP_HOURS; when the notes would pass the memory budget
(the snapshot keeps a tenth of it free for them: memory/notes.py); when memory is
turned on or off; when the instructions themselves changed; and when an ended
conversation is reopened (its kept prompt went when it ended).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from django.conf import settings

from coach.conversation import Conversation, history_in_steps, session_remembers, system_prompt
from coach.models import ChatSession, Message
from infra.prompts import prompt
from memory.context import MemoryContext, relationship_stage
from memory.notes import NOTES_CALL, Note, due_note, kept_block_budget, notes_of
from memory.selectors import (
    intentions_due_between,
    memory_events_after,
    newest_memory_event_id,
    next_intention_due_after,
)

if TYPE_CHECKING:
    from accounts.models import User

# Raised to have every kept prompt assembled again after a change to how one is assembled.
PROMPT_FORMAT = "2"
FIRST_TURN = "the conversation's first turn"
REOPENED = "the conversation was reopened"
INSTRUCTIONS_CHANGED = "the instructions changed"
MEMORY_SWITCHED = "memory was turned on or off"
NEW_DAY = "a new day"
LONG_GAP = "a long gap"
NOTES_PAST_BUDGET = "the notes passed the budget"
NONCE_IN_A_NOTE = "a note held the nonce"
# How the app's own rounds that carry notes are named, so every later request names them alike.
NOTE_CALL_PREFIX = "memory-note"
# Why a kept prompt is dropped before the next turn, which then assembles one for it.
PERSON_FORGOT = "the person deleted what it quoted"
# What a conversation keeps of its assembled prompt, beside the prompt itself.
KEPT_PROMPT_FIELDS = (
    "prompt",
    "prompt_nonce",
    "prompt_built_at",
    "prompt_day",
    "prompt_event_id",
    "prompt_memory_tokens",
    "prompt_learned",
    "prompt_remembers",
    "prompt_due_next_at",
    "prompt_version",
    "prompt_builds",
    "prompt_built_because",
    "prompt_cleared_because",
)


def conversation_for_turn(*, user: User, message: Message, now: datetime, earlier: Sequence[Message]) -> Conversation:
    """The messages for the model, for a turn that answers `message`: the conversation's
    kept system prompt (or one assembled now, kept from now on), its history since
    `history_from_id` (`earlier`, oldest first) with the notes of what changed in memory
    where it happened, then the person's message. Saves what the conversation keeps."""
    session = message.session
    remembers = session_remembers(session=session, user=user)
    notes: list[Note] = []
    reason = None
    if session.prompt and remembers and session.prompt_remembers:
        notes, reason = _notes_since_kept(user, session, now)
    reason = reason or _reassembly_reason(session, remembers=remembers, now=now, earlier=earlier, notes=notes)
    memory = None
    if reason:
        memory = _assembled(user, session, now=now, remembers=remembers, reason=reason)
        notes = []
    history = history_in_steps(earlier=earlier, message=message, from_id=session.history_from_id)
    if history.from_id != session.history_from_id:
        session.history_from_id = history.from_id
        session.save(update_fields=["history_from_id"])
    return Conversation(
        messages=[
            {"role": "system", "content": session.prompt},
            # A note of what an earlier answer to this very message changed (it was answered
            # again, or retried) comes after it: the request begins as that answer's did.
            *_with_notes([*history.messages, message], notes, nonce=session.prompt_nonce),
        ],
        memory=memory,
        history_dropped=history.dropped,
        remembers=remembers,
        rebuilt=reason or "",
        notes=len(notes),
    )


def kept_prompts_clear(*, user_id: int, because: str = PERSON_FORGOT) -> int:
    """Drop the kept prompts of the person's conversations at once (each is assembled again
    at its next turn, for `because`): what the person deleted may be quoted in them, and it
    is kept nowhere, not even encrypted until the next turn. Returns how many were dropped."""
    return ChatSession.objects.filter(user_id=user_id, prompt_built_at__isnull=False).update(
        prompt="", prompt_built_at=None, prompt_cleared_because=because
    )


def prompt_version() -> str:
    """What a kept prompt was assembled from: the instructions' text and the format."""
    made_of = "\n".join([PROMPT_FORMAT, prompt("coach", "coach"), prompt("coach", "not_remembered")])
    return hashlib.sha256(made_of.encode()).hexdigest()[:16]


def _notes_since_kept(user: User, session: ChatSession, now: datetime) -> tuple[list[Note], str | None]:
    events = memory_events_after(user=user, event_id=session.prompt_event_id or 0)
    notes, correction = notes_of(events, time_zone=user.time_zone, learned=session.prompt_learned)
    if correction:
        return [], correction
    lead = timedelta(days=settings.MEMORY_PROSPECTIVE_LEAD_DAYS)
    if (
        session.prompt_due_next_at is not None
        and session.prompt_built_at is not None
        and now >= session.prompt_due_next_at
    ):
        for intention in intentions_due_between(user=user, after=session.prompt_built_at, until=now, lead=lead):
            assert intention.due_at is not None  # the query asked for those due
            notes.append(due_note(intention, at=intention.due_at - lead, time_zone=user.time_zone))
    return sorted(notes, key=lambda note: note.at), None


def _reassembly_reason(
    session: ChatSession, *, remembers: bool, now: datetime, earlier: Sequence[Message], notes: Sequence[Note]
) -> str | None:
    if not session.prompt:
        return session.prompt_cleared_because or (REOPENED if session.prompt_builds else FIRST_TURN)
    if session.prompt_version != prompt_version():
        return INSTRUCTIONS_CHANGED
    if remembers != session.prompt_remembers:
        return MEMORY_SWITCHED
    if now.astimezone(ZoneInfo(session.user.time_zone)).date() != session.prompt_day:
        return NEW_DAY
    if earlier and now - earlier[-1].created_at > timedelta(hours=settings.COACH_PROMPT_GAP_HOURS):
        return LONG_GAP
    if session.prompt_memory_tokens + sum(note.tokens for note in notes) > settings.MEMORY_CONTEXT_BUDGET_TOKENS:
        return NOTES_PAST_BUDGET
    if session.prompt_nonce and any(session.prompt_nonce in note.text for note in notes):
        return NONCE_IN_A_NOTE
    return None


def _assembled(user: User, session: ChatSession, *, now: datetime, remembers: bool, reason: str) -> MemoryContext:
    """Assemble the prompt afresh and keep it with the conversation: what it reflects is
    read first, so a change made while it is assembled comes as a note, never goes missing."""
    event_id = newest_memory_event_id(user=user) if remembers else 0
    lead = timedelta(days=settings.MEMORY_PROSPECTIVE_LEAD_DAYS)
    budget = kept_block_budget(settings.MEMORY_CONTEXT_BUDGET_TOKENS)
    text, memory = system_prompt(
        user=user, now=now, remembers=remembers, nonce=session.prompt_nonce or None, memory_budget_tokens=budget
    )
    session.prompt, session.prompt_nonce = text, memory.nonce or session.prompt_nonce
    session.prompt_built_at = now
    session.prompt_day = now.astimezone(ZoneInfo(user.time_zone)).date()
    session.prompt_event_id = event_id
    session.prompt_memory_tokens = memory.tokens
    session.prompt_learned = memory.learned
    session.prompt_remembers = remembers
    session.prompt_due_next_at = next_intention_due_after(user=user, moment=now, lead=lead) if remembers else None
    session.prompt_version = prompt_version()
    session.prompt_builds += 1
    session.prompt_built_because = reason
    session.prompt_cleared_because = ""
    session.save(update_fields=list(KEPT_PROMPT_FIELDS))
    return memory


def _with_notes(history: Sequence[Message], notes: Sequence[Note], *, nonce: str) -> list[dict[str, Any]]:
    """The history with the notes after what came before them: at the same place in every
    later request, so each request still begins with the one before. The notes between two
    messages go together, as the result of the app's own `memory_notes` call: data, in the
    conversation's markers, in a role that gives no instructions."""
    sent: list[dict[str, Any]] = []
    waiting = list(notes)
    for past in history:
        due = [note for note in waiting if note.at < past.created_at]
        if due:
            sent += _notes_round(due, nonce)
            waiting = waiting[len(due) :]
        sent.append({"role": past.role, "content": past.content})
    if waiting:
        sent += _notes_round(waiting, nonce)
    return sent


def _notes_round(notes: Sequence[Note], nonce: str) -> list[dict[str, Any]]:
    # Named by when its first change happened: the same in every later request.
    call_id = f"{NOTE_CALL_PREFIX}-{int(notes[0].at.timestamp() * 1_000_000)}"
    lines = [note.text for note in notes]
    learned = [note.learned for note in notes if note.learned is not None]
    if learned:
        lines.append(stage_now(learned[-1]))
    body = "\n".join([f"<<MEMORY NOTES {nonce}>>", *lines, f"<<END MEMORY NOTES {nonce}>>"])
    call = {"id": call_id, "type": "function", "function": {"name": NOTES_CALL, "arguments": "{}"}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": body},
    ]


def stage_now(learned: int) -> str:
    """The relationship stage, counted again at a note that changed it."""
    return f"Relationship stage now: {relationship_stage(learned)} ({learned} memories learned in conversation)."
