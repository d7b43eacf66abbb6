"""A conversation's prompt: assembled at its first turn and sent byte for byte after, so each
turn's request begins with the one before; what changes in memory meanwhile comes as a note
where it happened; assembled afresh only when it must be, and never over its budget."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from accounts.models import User
from coach import prompting
from coach.claims import reply_save, turn_begin
from coach.conversation import today_line
from coach.models import ChatSession, Message
from coach.services import message_post, session_end, session_start
from coach.turn import turn_run
from infra.prompts import prompt
from memory.drafts import MemoryDraft
from memory.models import Memory
from memory.notes import PERSONS_CORRECTION
from memory.services import memory_delete, memory_edit_by_user, memory_save
from offline_coach import ModelServer
from offline_coach.prompt import stated_today
from offline_coach.wire import count_tokens
from tests.coach.factories import TALK_SAVE
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db(transaction=True)
SYDNEY_MONDAY_MORNING = datetime(2025, 3, 9, 22, 30, tzinfo=UTC)


def turn(session: ChatSession, text: str) -> Message:
    message = message_post(session=session, text=text, client_id=None)
    async_to_sync(turn_run)(user_id=session.user_id, message_id=message.pk)
    return message


def notes_in(messages: list[dict]) -> list[str]:
    """The notes of what changed in memory a request carries: its `memory_notes` results."""
    return [m["content"] for m in messages if m["role"] == "tool" and m["tool_call_id"].startswith("memory-note")]


def first_rounds(model_server: ModelServer) -> list[list[dict]]:
    """The first request of each turn (a turn's later rounds carry its tool calls)."""
    return [body["messages"] for body in model_server.chat_requests() if body["messages"][-1]["role"] == "user"]


def begin(session: ChatSession, text: str, now: datetime) -> prompting.Conversation:
    """A turn's beginning at `now`, answered at once (no model): what it would send."""
    message = message_post(session=session, text=text, client_id=None, now=now)
    begun = turn_begin(user_id=session.user_id, message_id=message.pk, now=now)
    reply_save(attempt=begun.attempt, text="Noted.", now=now + timedelta(seconds=1))
    return begun.conversation


def coach_saves(user: User, key: str, summary: str, *, category: str = "habit", now: datetime | None = None) -> Memory:
    draft = MemoryDraft(key=key, tier="episodic", category=category, summary=summary, content=summary)
    return memory_save(user=user, draft=draft, source="coach", actor="coach", now=now).memory


def kept(session: ChatSession) -> ChatSession:
    return ChatSession.objects.get(pk=session.pk)


# Byte for byte -----------------------------------------------------------------------------


def test_each_turns_request_begins_with_the_whole_request_before_it(user: User, model_server: ModelServer) -> None:
    make_memory(user, "knee", source="user", category="injury", summary="Bad left knee")
    session = session_start(user=user)
    model_server.queue_text("Hello Ada.")
    model_server.queue_tool_calls([("save_memory", TALK_SAVE)], text="A talk in June, noted.")
    model_server.queue_text("Let us plan it.")
    model_server.queue_text("Good.")

    for text in ["Hi", "I'm giving a talk in June", "Help me plan it", "Thanks"]:
        turn(session, text)

    requests = first_rounds(model_server)
    assert len(requests) == 4
    for before, after in itertools.pairwise(requests):
        assert after[: len(before)] == before
    assert len({request[0]["content"] for request in requests}) == 1
    assert kept(session).prompt_builds == 1


def test_a_save_reaches_later_turns_as_a_note_after_the_exchange_it_was_made_in(
    user: User, model_server: ModelServer
) -> None:
    session = session_start(user=user)
    model_server.queue_tool_calls([("save_memory", TALK_SAVE)], text="A talk in June, noted.")
    model_server.queue_text("Let us plan it.")

    turn(session, "I'm giving a talk in June")
    turn(session, "Help me plan it")

    sent = first_rounds(model_server)[-1]
    roles = [message["role"] for message in sent]
    # The note comes as the result of the app's own call, after the exchange it was made in.
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sent[2]["tool_calls"][0]["function"]["name"] == "memory_notes"
    [note] = notes_in(sent)
    assert "You saved:\n- talk-june (" in note and "Giving a talk in June (due " in note
    assert "Giving a talk in June" not in sent[0]["content"]


def test_a_safety_memory_saved_by_the_coach_is_in_its_note_in_full(user: User) -> None:
    session = session_start(user=user)
    now = timezone.now()
    begin(session, "Hi", now)
    coach_saves(user, "nuts", "Allergic to cashews", category="allergy", now=now + timedelta(minutes=1))

    conversation = begin(session, "Plan my snacks", now + timedelta(minutes=2))

    [note] = notes_in(conversation.messages)
    assert "Allergic to cashews" in note and "allergy-1" in note
    assert conversation.rebuilt == "" and conversation.notes == 1


# Assembled afresh only when it must be -----------------------------------------------------


def test_the_persons_edit_has_the_prompt_assembled_again_without_the_old_text(user: User) -> None:
    shifts = make_memory(user, "shifts", source="user", category="schedule", summary="Works night shifts")
    session = session_start(user=user)
    now = timezone.now()
    before = begin(session, "Hi", now)
    draft = MemoryDraft.of(shifts)
    draft = MemoryDraft(
        key=draft.key,
        tier=draft.tier,
        category=draft.category,
        summary="Works day shifts now",
        content="Works day shifts now",
    )
    memory_edit_by_user(user=user, memory_id=shifts.pk, draft=draft, now=now + timedelta(minutes=1))

    after = begin(session, "Plan my week", now + timedelta(minutes=2))

    assert "night shifts" in before.messages[0]["content"]
    assert "night shifts" not in str(after.messages) and "day shifts" in after.messages[0]["content"]
    assert after.rebuilt == PERSONS_CORRECTION == kept(session).prompt_built_because


def test_a_memory_the_person_deleted_is_never_sent_again(user: User) -> None:
    secret = make_memory(user, "divorce", source="user", category="background", summary="Going through a divorce")
    session = session_start(user=user)
    now = timezone.now()
    begin(session, "Hi", now)
    memory_delete(user=user, memory_id=secret.pk, actor="user", now=now + timedelta(minutes=1))

    after = begin(session, "Plan my week", now + timedelta(minutes=2))

    assert "divorce" not in str(after.messages).lower()


def test_a_later_day_of_the_persons_own_has_it_assembled_again(user: User) -> None:
    User.objects.filter(pk=user.pk).update(time_zone="Australia/Sydney")
    session = session_start(user=user)

    monday = begin(session, "Hi", SYDNEY_MONDAY_MORNING)
    later_monday = begin(session, "Again", SYDNEY_MONDAY_MORNING + timedelta(hours=3))
    tuesday = begin(session, "Next day", SYDNEY_MONDAY_MORNING + timedelta(hours=15))

    assert "Today: 2025-03-10 (Monday)" in monday.messages[0]["content"]
    assert later_monday.rebuilt == "" and later_monday.messages[0] == monday.messages[0]
    assert tuesday.rebuilt == prompting.NEW_DAY and "Today: 2025-03-11 (Tuesday)" in tuesday.messages[0]["content"]


def test_a_conversation_resumed_after_a_long_gap_has_it_assembled_again(user: User, settings) -> None:
    settings.COACH_PROMPT_GAP_HOURS = 2
    User.objects.filter(pk=user.pk).update(time_zone="UTC")
    session = session_start(user=user)
    morning = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)

    begin(session, "Hi", morning)
    soon = begin(session, "Again", morning + timedelta(hours=1))
    later = begin(session, "Back", morning + timedelta(hours=4))

    assert soon.rebuilt == "" and later.rebuilt == prompting.LONG_GAP


def test_notes_that_would_pass_the_budget_have_it_assembled_again_and_no_request_passes_it(
    user: User, settings
) -> None:
    settings.MEMORY_CONTEXT_BUDGET_TOKENS = 700
    session = session_start(user=user)
    now = timezone.now()
    begin(session, "Hi", now)
    reasons = []
    for n in range(24):
        summary = f"A longish note number {n} about the week's plans, the runs, the talk and the sleep"
        coach_saves(user, f"note-{n}", summary, now=now)
        conversation = begin(session, f"Turn {n}", now + timedelta(minutes=n + 1))
        reasons.append(conversation.rebuilt)
        session.refresh_from_db()
        notes = sum(len(m["content"]) // 4 + 1 for m in conversation.messages[1:] if m["role"] == "system")
        assert session.prompt_memory_tokens + notes <= settings.MEMORY_CONTEXT_BUDGET_TOKENS

    assert prompting.NOTES_PAST_BUDGET in reasons and reasons.count("") > reasons.count(prompting.NOTES_PAST_BUDGET)


def test_an_ended_conversation_keeps_no_prompt_and_assembles_one_when_reopened(user: User) -> None:
    make_memory(user, "knee", source="user", category="injury", summary="Bad left knee")
    session = session_start(user=user)
    now = timezone.now()
    begin(session, "Hi", now)
    assert "Bad left knee" in kept(session).prompt

    session_end(session=session, now=now + timedelta(minutes=5))
    assert kept(session).prompt == ""
    reopened = begin(kept(session), "One more thing", now + timedelta(minutes=10))

    assert reopened.rebuilt == prompting.REOPENED and "Bad left knee" in reopened.messages[0]["content"]


def test_the_block_markers_nonce_is_the_conversations_and_in_no_memory_or_note(user: User) -> None:
    session = session_start(user=user)
    now = timezone.now()
    begin(session, "Hi", now)
    nonce = kept(session).prompt_nonce
    coach_saves(user, "talk", "Giving a talk in June", now=now)
    later = begin(session, "Again", now + timedelta(minutes=1))

    assert len(nonce) == 16 and f"<<MEMORIES {nonce}>>" in later.messages[0]["content"]
    # The nonce is in the markers of the block and of the notes, and nowhere else.
    for text in [later.messages[0]["content"], *notes_in(later.messages)]:
        unmarked = [
            line
            for line in text.splitlines()
            if not line.startswith(("<<MEMORIES ", "<<END MEMORIES ", "<<MEMORY NOTES ", "<<END MEMORY NOTES "))
        ]
        assert all(nonce not in line for line in unmarked)
    assert notes_in(later.messages)
    assert not any(nonce in m.summary or nonce in m.content for m in Memory.objects.filter(user=user))


def test_turning_memory_off_mid_conversation_has_it_assembled_without_memory(user: User) -> None:
    make_memory(user, "oats", summary="Oats every morning")
    session = session_start(user=user)
    now = timezone.now()
    begin(session, "Hi", now)
    User.objects.filter(pk=user.pk).update(memory_enabled=False)

    after = begin(session, "Again", now + timedelta(minutes=1))

    assert after.rebuilt == prompting.MEMORY_SWITCHED and "Oats" not in after.messages[0]["content"]


def test_an_intention_coming_due_during_the_conversation_reaches_it_as_a_note(user: User, settings) -> None:
    settings.MEMORY_PROSPECTIVE_LEAD_DAYS = 1
    now = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
    User.objects.filter(pk=user.pk).update(time_zone="UTC")
    talk = MemoryDraft(
        key="talk",
        tier="prospective",
        category="goal",
        summary="Talk at the library",
        content="Talk at the library",
        due_at=now + timedelta(days=1, minutes=30),
        status="open",
    )
    memory_save(user=user, draft=talk, source="coach", actor="coach", now=now - timedelta(days=1))
    session = session_start(user=user)

    before = begin(session, "Hi", now)
    after = begin(session, "Again", now + timedelta(hours=1))

    assert "raise it now" not in before.messages[0]["content"]
    assert after.rebuilt == ""
    [note] = notes_in(after.messages)
    assert "now due, bring it up when it fits:\n- talk (" in note


# The history, dropped in steps -------------------------------------------------------------


def test_the_history_drops_its_oldest_quarter_at_once_and_holds_its_start_between_steps(user: User, settings) -> None:
    settings.COACH_HISTORY_BUDGET_TOKENS = 200
    session = session_start(user=user)
    now = timezone.now()
    requests = [
        begin(session, f"Message number {n} " + "word " * 10, now + timedelta(seconds=n)).messages for n in range(30)
    ]

    steps = [n for n, (before, after) in enumerate(itertools.pairwise(requests)) if after[: len(before)] != before]
    assert steps and len(steps) < len(requests) // 3
    for sent in requests:
        history = [m for m in sent if m["role"] != "system"]
        assert sum(len(m["content"]) for m in history) // 4 <= settings.COACH_HISTORY_BUDGET_TOKENS + 50


# The person's day --------------------------------------------------------------------------


def test_today_is_the_persons_own_date_and_the_offline_coach_reads_the_line_the_app_sends() -> None:
    line = today_line(SYDNEY_MONDAY_MORNING, "Australia/Sydney")

    assert line == "Today: 2025-03-10 (Monday)"
    assert today_line(SYDNEY_MONDAY_MORNING, "UTC") == "Today: 2025-03-09 (Sunday)"
    assert str(stated_today([{"role": "system", "content": f"# Coach\n\n{line}\n\nmore"}])) == "2025-03-10"


# Cached tokens ----------------------------------------------------------------------------


def test_a_replys_tokens_keep_what_the_server_read_from_its_cache(user: User, model_server: ModelServer) -> None:
    session = session_start(user=user)
    model_server.queue_text("Hello Ada.")
    model_server.queue_text("Let us plan it.")

    first, second = turn(session, "Hi"), turn(session, "Help me plan my week")

    replies = {m.reply_to_id: m for m in Message.objects.filter(reply_to__in=[first, second])}
    assert replies[first.pk].cached_prompt_tokens == 0
    cached, prompt = replies[second.pk].cached_prompt_tokens, replies[second.pk].prompt_tokens
    assert 0 < cached < prompt and cached > prompt * 0.8


def test_a_new_conversations_first_request_is_read_from_cache_as_far_as_the_tools_and_instructions(
    user: User, model_server: ModelServer
) -> None:
    model_server.queue_text("Hello Ada.")
    model_server.queue_text("Hello again.")

    turn(session_start(user=user), "Hi")
    second = turn(session_start(user=user), "Hi again")

    request = model_server.chat_requests()[-1]
    shared = count_tokens(json.dumps(request["tools"], sort_keys=True)) + count_tokens(prompt("coach", "coach"))
    reply = Message.objects.get(reply_to=second)
    assert reply.cached_prompt_tokens >= shared
