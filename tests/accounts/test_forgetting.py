"""Forgetting that reaches everywhere (DESIGN.md section 8): what was proven to slip past
each way of forgetting, one test each, then every way through the search of every place."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from accounts.export import account_export
from accounts.forgetting import (
    account_delete,
    conversation_delete_by_person,
    memories_delete_all_by_person,
    memory_delete_by_person,
    proposal_confirm_by_person,
    summary_forget_by_person,
)
from accounts.memory_setting import user_memory_set
from accounts.models import User
from accounts.where_words_live import Way
from coach.exchange_index import exchanges_index
from coach.look_back import LOOK_BACK_TOOL
from coach.models import ChatSession, ConversationEmbedding, Message
from coach.runner import wait_for_running
from coach.services import message_post, session_end, session_start, session_summary_save, summaries_due
from coach.tasks import summarise_session
from coach.temporary import LEAVE_GRACE_SECONDS, temporary_conversation_left, temporary_conversations_sweep
from coach.turn import turn_start
from emails.models import Email
from memory.drafts import MemoryDraft
from memory.models import Memory, MemoryProposal
from memory.notes import notes_of
from memory.selectors import memory_events_after
from memory.services import memory_edit_by_user, memory_save, memory_undo_delete
from memory.tool_schemas import tool_definitions
from memory.tools import ToolContext, run_tool
from memory.undo import UndoRefused, undo_token
from offline_coach import ModelServer
from tests.coach.factories import make_session
from tests.conftest import make_user
from tests.emails.factories import make_email
from tests.forgetting import assert_forgotten, next_request, places_holding
from tests.memory.factories import make_memories, make_memory

pytestmark = pytest.mark.django_db(transaction=True)

PHRASE = "qzkumquat qzlantern qzmarmot"
TURN_SECONDS = 30


def answered(person: User, session: ChatSession, text: str, model_server: ModelServer, reply: str = "Noted.") -> None:
    model_server.queue_text(reply)
    message = message_post(session=session, text=text, client_id=None)
    turn_start(user_id=person.pk, message_id=message.pk).result(timeout=TURN_SECONDS)


# The seven proofs ---------------------------------------------------------------------------


def test_deleting_all_memories_leaves_none_of_them_in_an_open_conversations_next_request(
    user: User, model_server: ModelServer
) -> None:
    make_memory(user, "lantern-note", summary=f"Keeps a {PHRASE} by the bed")
    session = make_session(user)
    answered(user, session, "Hello", model_server)
    session.refresh_from_db()
    assert "qzlantern" in session.prompt

    memories_delete_all_by_person(user=user)

    session.refresh_from_db()
    assert "qzlantern" not in session.prompt
    assert "qzlantern" not in next_request(user, model_server, session=session)


def test_a_forgotten_summary_is_found_by_no_look_back_its_recap_is_withdrawn_and_it_is_never_written_again(
    user: User, model_server: ModelServer
) -> None:
    # Only its summary is indexed: whatever the look-back finds of it, it found by the summary.
    past = make_session(user)
    session_end(session=past)
    session_summary_save(session=past, summary=f"You planned the week around the {PHRASE}.")
    exchanges_index(user_id=user.pk)
    assert ConversationEmbedding.objects.filter(session=past, kind="summary").exists()
    recap = make_email(
        user, kind=Email.Kind.SESSION_SUMMARY, period_key=f"session-{past.pk}", subject="Your week", body=PHRASE
    )
    Email.objects.filter(pk=recap.pk).update(session=past)

    assert summary_forget_by_person(user=user, session_id=past.pk)

    assert not ConversationEmbedding.objects.filter(session=past, kind="summary").exists()
    context = ToolContext(user=user)
    found = LOOK_BACK_TOOL.run(context, query=PHRASE, limit=None)
    assert found["exchanges"] == 0 and context.changes == [], "no cue names the conversation"
    recap.refresh_from_db()
    assert recap.status == Email.Status.SKIPPED and not recap.body_text and not recap.subject
    # One more message, and the conversation ends again: no summary is written again.
    message_post(session=past, text="One more thing", client_id=None)
    session_end(session=ChatSession.objects.get(pk=past.pk))
    assert past.pk not in summaries_due()


def test_what_is_said_with_memory_off_reaches_no_summary_and_no_look_back_once_memory_is_back_on(
    user: User, model_server: ModelServer
) -> None:
    session = make_session(user)
    answered(user, session, "I want to run a marathon this spring", model_server)
    user_memory_set(user=user, enabled=False)
    answered(user, session, f"Between us: {PHRASE} is my secret", model_server)
    user_memory_set(user=user, enabled=True)
    answered(user, session, "Back to the marathon plan", model_server)

    session.refresh_from_db()
    session_end(session=session)
    summaries_due()
    model_server.queue_text("You talked about a marathon.")
    before = len(model_server.chat_requests())
    summarise_session.apply(args=[session.pk])

    asked = json.dumps(model_server.chat_requests()[before:]).lower()
    assert "marathon" in asked, "the summary was asked for"
    assert "qzlantern" not in asked
    exchanges_index(user_id=user.pk)
    found = LOOK_BACK_TOOL.run(ToolContext(user=user), query=PHRASE, limit=None)
    assert "qzlantern" not in json.dumps(found).lower()


def test_a_person_moving_a_weekly_episode_to_another_category_keeps_the_store_within_its_ceiling(user: User) -> None:
    make_memories(user, settings.MEMORY_MAX_STORED)
    episode = make_memory(user, "week-2026-40", category="episode", summary="A week of easy runs")

    memory_edit_by_user(
        user=user,
        memory_id=episode.pk,
        draft=MemoryDraft(key="", tier="episodic", category="goal", summary="Run easy all autumn", content=""),
    )

    assert Memory.objects.filter(user=user).exclude(category="episode").count() <= settings.MEMORY_MAX_STORED


def test_a_confirmed_suggestion_keeps_the_store_within_its_ceiling(user: User) -> None:
    make_memories(user, settings.MEMORY_MAX_STORED)
    episode = make_memory(user, "week-2026-41", category="episode", summary="A week with a sore knee")
    # The coach may not move its note into a protected category itself: that is a suggestion.
    result = run_tool(
        ToolContext(user=user),
        "update_memory",
        json.dumps(
            {
                "key": "week-2026-41",
                "tier": None,
                "category": "injury",
                "summary": "Sore left knee after long runs",
                "content": None,
                "due_at": None,
                "status": None,
                "clear": None,
                "reason": "it is about an injury",
            }
        ),
    )
    assert json.loads(result)["status"] == "proposed", result
    proposal = MemoryProposal.objects.get(user=user, memory=episode)

    proposal_confirm_by_person(user=user, proposal=proposal)

    assert Memory.objects.filter(user=user).exclude(category="episode").count() <= settings.MEMORY_MAX_STORED


def test_the_coach_cannot_file_its_own_note_as_a_weekly_episode(user: User) -> None:
    weeks = [make_memory(user, f"week-2026-{n}", category="episode") for n in range(settings.MEMORY_MAX_EPISODES)]
    categories = {
        tool["function"]["name"]: tool["function"]["parameters"]["properties"].get("category", {}).get("enum", [])
        for tool in tool_definitions()
    }
    assert "episode" not in categories["save_memory"] and "episode" not in categories["update_memory"]

    result = run_tool(
        ToolContext(user=user),
        "save_memory",
        json.dumps(
            {
                "key": "my-week",
                "tier": "episodic",
                "category": "episode",
                "summary": "A busy week",
                "content": "",
                "due_at": None,
                "keep_separate": None,
            }
        ),
    )

    assert json.loads(result)["status"] == "error", result
    assert set(Memory.objects.filter(user=user, category="episode")) == set(weeks)


def test_a_memory_staff_added_is_told_to_the_model_as_supports(user: User) -> None:
    memory_save(
        user=user,
        draft=MemoryDraft(key="shoe-size", tier="profile", category="other", summary="Shoe size 43", content=""),
        source="admin",
        actor="admin",
    )

    notes, correction = notes_of(memory_events_after(user=user, event_id=0), time_zone="UTC")

    assert correction is None
    [note] = notes
    assert "support" in note.text.lower() and "the person added" not in note.text.lower()


def test_the_export_holds_no_process_internals(user: User, model_server: ModelServer) -> None:
    session = make_session(user)
    answered(user, session, "Hello there", model_server)
    make_email(user, status=Email.Status.SENT, subject="Hi", body="Hello")

    exported = account_export(user=user, now=timezone.now())

    messages = [m for s in exported["chat_sessions"] for m in s["messages"]]
    assert messages
    internals = {"claimed_by", "claimed_at", "attempt", "heartbeat_at", "claim_token", "summary_claimed_at", "attempts"}
    for row in [*messages, *exported["chat_sessions"], *exported["emails"]]:
        assert not internals & set(row), sorted(internals & set(row))
    assert all("prompt" not in key for s in exported["chat_sessions"] for key in s if key != "messages")


def test_a_single_deletion_takes_the_memory_out_of_every_kept_prompt_at_once(
    user: User, model_server: ModelServer
) -> None:
    memory = make_memory(user, "lantern-note", summary=f"Keeps a {PHRASE} by the bed")
    session = make_session(user)
    answered(user, session, "Hello", model_server)
    assert "qzlantern" in ChatSession.objects.get(pk=session.pk).prompt

    memory_delete_by_person(user=user, memory_id=memory.pk)

    assert "qzlantern" not in ChatSession.objects.get(pk=session.pk).prompt


def test_forgetting_one_persons_words_leaves_another_persons_alone(user: User, model_server: ModelServer) -> None:
    other = make_user("other-forgetting@example.com")
    make_memory(user, "lantern-note", summary=f"Keeps a {PHRASE} by the bed")
    theirs = make_memory(other, "lantern-note", summary=f"Also keeps a {PHRASE}")
    their_session = make_session(other)
    answered(other, their_session, "Hello", model_server)

    memories_delete_all_by_person(user=user)

    assert Memory.objects.filter(pk=theirs.pk).exists()
    assert "qzlantern" in ChatSession.objects.get(pk=their_session.pk).prompt


# Every way to forget, through the search of every place ------------------------------------

OTHER = "qzpelican qzturnip qzwalrus"


def saved_through_chat(
    person: User, session: ChatSession, summary: str, model_server: ModelServer, *, category: str = "other"
) -> Memory:
    """The coach saves `summary` in a turn of `session`: the memory, its history, its cue in
    the reply kept in Redis, and a note in the conversation's next request."""
    arguments = {"key": "secret-note", "tier": "profile", "category": category, "summary": summary, "content": ""}
    model_server.queue_tool_calls([("save_memory", {**arguments, "due_at": None, "keep_separate": None})])
    answered(person, session, "Remember this, please", model_server)
    return Memory.objects.filter(user=person).order_by("-pk").first()


def a_person_who_remembers(email: str, phrase: str, model_server: ModelServer) -> tuple[User, Memory]:
    """A person whose coach saved `phrase` in a conversation, proposed a change to it, wrote
    a check-in about it, and started a second conversation whose prompt quotes it."""
    person = make_user(email)
    memory = saved_through_chat(person, make_session(person), f"Allergic to {phrase}", model_server, category="allergy")
    MemoryProposal.objects.create(
        user=person, memory=memory, kind="delete", reason=f"You said {phrase} is over", base_version=memory.version
    )
    make_email(
        person,
        kind=Email.Kind.CHECK_IN,
        status=Email.Status.SENT,
        subject=f"About {phrase}",
        body=f"How is the {phrase} going?",
        memory=memory,
        sent_at=timezone.now(),
    )
    answered(person, make_session(person), "Hello again", model_server)
    return person, memory


# Where the scenarios below put the phrase, as the search of every place finds it before
# anything is forgotten: so a search that found nothing could not pass for forgetting.
WHERE_A_MEMORY_GOES = (
    "memory_memory.summary",
    "memory_memory.embedding",
    "memory_memoryevent.after",
    "memory_memoryproposal.reason",
    "coach_chatsession.prompt",
    "emails_email.body_text",
    "emails_email.embedding",
    "redis",
    "the export",
    "search_memories",
    "the next request, in a new conversation",
    "the next request, in each open conversation",
)
WHERE_A_SUMMARY_GOES = (
    "coach_chatsession.summary",
    "coach_chatsession.prompt",
    "coach_conversationembedding.embedding",
    "emails_email.body_text",
    "search_conversations",
    "the export",
    "the next request, in a new conversation",
)


def still_holds(phrase: str, person: User, model_server: ModelServer, *places: str) -> None:
    holding = set(places_holding(phrase, person, model_server=model_server))
    assert set(places) <= holding, f"{phrase!r} is not in {sorted(set(places) - holding)}"


def test_a_deleted_memory_is_found_nowhere_it_was_and_the_other_persons_stay(model_server: ModelServer) -> None:
    person, memory = a_person_who_remembers("forgets@example.com", PHRASE, model_server)
    other, _ = a_person_who_remembers("keeps@example.com", OTHER, model_server)

    still_holds(PHRASE, person, model_server, *WHERE_A_MEMORY_GOES)

    memory_delete_by_person(user=person, memory_id=memory.pk)

    assert_forgotten(PHRASE, person, way=Way.MEMORY_DELETED, model_server=model_server)
    still_holds(OTHER, other, model_server, "memory_memory.summary", "emails_email.body_text", "redis", "the export")


def test_deleting_all_memories_forgets_them_and_every_email_drawn_on_them(model_server: ModelServer) -> None:
    person, _ = a_person_who_remembers("forgets@example.com", PHRASE, model_server)
    make_email(person, status=Email.Status.SENT, subject="This week", body=f"Keep the {PHRASE} handy.")
    make_email(person, period_key="2026-W02", subject="Next week", body=f"The {PHRASE} again.")
    other, _ = a_person_who_remembers("keeps@example.com", OTHER, model_server)

    still_holds(PHRASE, person, model_server, *WHERE_A_MEMORY_GOES)

    memories_delete_all_by_person(user=person)

    assert_forgotten(PHRASE, person, way=Way.MEMORIES_DELETED_ALL, model_server=model_server)
    assert Email.objects.filter(user=person, status=Email.Status.SKIPPED).count() == 1, "the queued one withdrawn"
    still_holds(OTHER, other, model_server, "memory_memory.summary", "emails_email.subject", "the export")


def a_person_with_a_summary(email: str, phrase: str, model_server: ModelServer) -> tuple[User, ChatSession]:
    """A person whose ended conversation was summarised with `phrase` (the summary alone
    holds it), indexed for the look-back, recapped by email, and quoted in a conversation
    under way."""
    person = make_user(email)
    past = make_session(person, "Let us plan the week", "Sure.")
    session_end(session=past)
    session_summary_save(session=past, summary=f"You planned the week around the {phrase}.")
    exchanges_index(user_id=person.pk)
    recap = make_email(
        person,
        kind=Email.Kind.SESSION_SUMMARY,
        period_key=f"session-{past.pk}",
        status=Email.Status.SENT,
        subject="Your week",
        body=f"We planned the week around the {phrase}.",
        sent_at=timezone.now(),
    )
    Email.objects.filter(pk=recap.pk).update(session=past)
    answered(person, make_session(person), "Hello again", model_server)
    return person, past


def test_a_deleted_summary_is_found_nowhere_it_was(model_server: ModelServer) -> None:
    person, past = a_person_with_a_summary("forgets@example.com", PHRASE, model_server)
    other, _ = a_person_with_a_summary("keeps@example.com", OTHER, model_server)

    still_holds(PHRASE, person, model_server, *WHERE_A_SUMMARY_GOES)

    assert summary_forget_by_person(user=person, session_id=past.pk)

    assert_forgotten(PHRASE, person, way=Way.SUMMARY_DELETED, model_server=model_server)
    still_holds(OTHER, other, model_server, "coach_chatsession.summary", "coach_conversationembedding.embedding")


def test_a_deleted_conversation_is_found_nowhere_it_was(model_server: ModelServer) -> None:
    person, past = a_person_with_a_summary("forgets@example.com", PHRASE, model_server)
    answered(person, past, f"And the {PHRASE} once more", model_server, reply=f"The {PHRASE}, noted.")
    exchanges_index(user_id=person.pk)
    other, theirs = a_person_with_a_summary("keeps@example.com", OTHER, model_server)
    answered(other, theirs, f"And the {OTHER} once more", model_server, reply=f"The {OTHER}, noted.")

    still_holds(PHRASE, person, model_server, *WHERE_A_SUMMARY_GOES, "coach_message.content", "redis")

    assert conversation_delete_by_person(user=person, session_id=past.pk)

    assert_forgotten(PHRASE, person, way=Way.CONVERSATION_DELETED, model_server=model_server)
    still_holds(OTHER, other, model_server, "coach_message.content", "redis", "the export")


def test_words_said_with_memory_off_reach_nothing_the_coach_keeps(model_server: ModelServer) -> None:
    person = make_user("forgets@example.com")
    session = make_session(person)
    answered(person, session, "I am training for a marathon", model_server)
    user_memory_set(user=person, enabled=False)
    answered(person, session, f"Between us: the {PHRASE}", model_server, reply=f"The {PHRASE} stays between us.")
    user_memory_set(user=person, enabled=True)
    session_end(session=session)
    summaries_due()
    model_server.queue_text("You are training for a marathon.")
    summarise_session.apply(args=[session.pk])
    exchanges_index(user_id=person.pk)
    still_holds(PHRASE, person, model_server, "coach_message.content", "redis", "the export")

    assert_forgotten(PHRASE, person, way=Way.SAID_WITH_MEMORY_OFF, model_server=model_server)


def a_temporary_conversation(email: str, phrase: str, model_server: ModelServer) -> tuple[User, ChatSession]:
    """A person's temporary conversation in which `phrase` was said and answered, while it lasts."""
    person = make_user(email)
    session = session_start(user=person, remembered=False)
    answered(person, session, f"Off the record: the {phrase}", model_server, reply=f"The {phrase}, off the record.")
    exchanges_index(user_id=person.pk)
    return person, session


def test_a_temporary_conversation_left_is_found_nowhere_and_the_other_persons_stays(
    model_server: ModelServer,
) -> None:
    person, session = a_temporary_conversation("forgets@example.com", PHRASE, model_server)
    other, theirs = a_temporary_conversation("keeps@example.com", OTHER, model_server)
    still_holds(PHRASE, person, model_server, "coach_message.content", "redis", "the export")

    # The page showing it was left; a moment later no page of it is open.
    left = timezone.now()
    assert temporary_conversation_left(user_id=person.pk, session_id=session.pk, now=left)
    assert temporary_conversations_sweep(now=left + timedelta(seconds=LEAVE_GRACE_SECONDS)) == 1

    assert_forgotten(PHRASE, person, way=Way.NOT_REMEMBERED, model_server=model_server)
    assert ChatSession.objects.filter(pk=theirs.pk).exists()
    still_holds(OTHER, other, model_server, "coach_message.content", "redis", "the export")


def test_a_temporary_conversation_ended_is_found_nowhere(model_server: ModelServer) -> None:
    person, session = a_temporary_conversation("forgets@example.com", PHRASE, model_server)
    still_holds(PHRASE, person, model_server, "coach_message.content", "redis", "the export")
    client = Client()
    client.force_login(person)

    response = client.post(f"/chat/{session.pk}/end")

    assert response.status_code == 302 and response.url == "/chat/new"
    assert_forgotten(PHRASE, person, way=Way.NOT_REMEMBERED, model_server=model_server)
    assert session.pk not in summaries_due()


def a_person_who_said(email: str, phrase: str, model_server: ModelServer) -> tuple[User, Message]:
    """A person whose last message, in a conversation under way that it titles, said
    `phrase`; answered with it quoted (the answer kept in Redis), and indexed for the
    look-back."""
    person = make_user(email)
    session = make_session(person)
    answered(person, session, f"The {phrase} is what I train for", model_server, reply=f"The {phrase}, noted.")
    exchanges_index(user_id=person.pk)
    return person, Message.objects.get(session=session, role="user")


def test_an_edited_message_leaves_its_earlier_words_nowhere_they_could_be_sent_or_found(
    model_server: ModelServer,
) -> None:
    person, message = a_person_who_said("forgets@example.com", PHRASE, model_server)
    other, _ = a_person_who_said("keeps@example.com", OTHER, model_server)
    client = Client()
    client.force_login(person)
    model_server.queue_text("A half marathon, then.")

    response = client.post(
        f"/chat/{message.session_id}/messages/{message.pk}/edit",
        {"text": "The half marathon is what I train for", "asked_at": message.waiting_since.isoformat()},
        headers={"HX-Request": "true"},
    )

    assert response.status_code == 200
    assert wait_for_running(timeout=TURN_SECONDS)
    assert_forgotten(PHRASE, person, way=Way.MESSAGE_EDITED, model_server=model_server)
    still_holds(
        OTHER,
        other,
        model_server,
        "coach_message.content",
        "coach_chatsession.title",
        "coach_conversationembedding.embedding",
        "redis",
        "search_conversations",
        "the export",
    )


def test_an_erased_account_is_found_nowhere_and_the_other_persons_stay(model_server: ModelServer) -> None:
    person, _ = a_person_who_remembers("forgets@example.com", PHRASE, model_server)
    answered(person, make_session(person), f"The {PHRASE} again", model_server, reply=f"The {PHRASE}.")
    other, _ = a_person_who_remembers("keeps@example.com", OTHER, model_server)

    still_holds(PHRASE, person, model_server, *WHERE_A_MEMORY_GOES, "coach_message.content")

    account_delete(user=person, hosts=["testserver"])

    assert_forgotten(PHRASE, person, way=Way.ACCOUNT_ERASED, model_server=model_server)
    still_holds(OTHER, other, model_server, "memory_memory.summary", "redis", "the export")


def test_an_undo_voided_by_deleting_all_brings_nothing_back(model_server: ModelServer) -> None:
    person, memory = a_person_who_remembers("forgets@example.com", PHRASE, model_server)
    token = undo_token(memory_delete_by_person(user=person, memory_id=memory.pk))
    memories_delete_all_by_person(user=person)

    with pytest.raises(UndoRefused):
        memory_undo_delete(user=User.objects.get(pk=person.pk), token=token)

    assert_forgotten(PHRASE, person, way=Way.UNDO_VOIDED, model_server=model_server)


def test_a_recap_being_drafted_when_its_summary_is_forgotten_is_withdrawn_and_its_sender_loses_its_claim(
    user: User,
) -> None:
    import uuid

    past = make_session(user)
    session_end(session=past)
    session_summary_save(session=past, summary=f"You planned the week around the {PHRASE}.")
    recap = make_email(user, kind=Email.Kind.SESSION_SUMMARY, period_key=f"session-{past.pk}")
    Email.objects.filter(pk=recap.pk).update(
        session=past, status=Email.Status.DRAFTING, claim_token=uuid.uuid4(), claimed_at=timezone.now()
    )

    assert summary_forget_by_person(user=user, session_id=past.pk)

    recap.refresh_from_db()
    assert (recap.status, recap.claim_token) == (Email.Status.SKIPPED, None)
