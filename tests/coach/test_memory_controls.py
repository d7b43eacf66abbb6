"""Memory off, and conversations that are not remembered: what the model is sent, what a
model that calls the memory tools anyway achieves (nothing), and what such a conversation
leaves behind once it has ended and every background job has run (nothing)."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from accounts.memory_setting import user_memory_set
from accounts.models import User
from coach.models import ChatSession, Message
from coach.services import message_post, session_end, session_start
from coach.tasks import summarise_ended_sessions, summarise_session
from emails.models import Email, WeeklyEpisodeRequest
from emails.planning import check_ins_plan, emails_dispatch_due, nudges_plan, session_recaps_plan, weekly_episodes_plan
from memory.models import Memory, MemoryEvent, MemoryProposal
from offline_coach import ModelServer
from tests.coach.factories import TALK_SAVE, make_session
from tests.coach.test_turn import SHOULDER_SAVE, stream, wait_for
from tests.emails.factories import reachable_now
from tests.memory.factories import make_memory

PRIVATE = "Between us: I give a talk on Thursday"


@pytest.fixture
def person(live_app: str, user: User, client: Client) -> Client:
    client.force_login(user)
    return client


def memory_off(user: User) -> None:
    user_memory_set(user=user, enabled=False)


def first_request(model_server: ModelServer) -> dict:
    return model_server.chat_requests()[0]


def tool_results(model_server: ModelServer) -> list[dict]:
    last = model_server.chat_requests()[-1]["messages"]
    return [json.loads(m["content"]) for m in last if m["role"] == "tool"]


def memory_rows(user: User) -> list[tuple]:
    """Every memory of the person, as it stands, with its history and proposals counted."""
    memories = sorted(
        (m.key, m.source, m.category, m.summary, m.content, m.updated_at) for m in Memory.objects.filter(user=user)
    )
    return [
        *memories,
        ("events", MemoryEvent.objects.filter(user=user).count()),
        ("proposals", MemoryProposal.objects.filter(user=user).count()),
    ]


# Memory off ---------------------------------------------------------------------------------


def test_with_memory_off_the_model_is_sent_no_memory_block_and_no_tools(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    make_memory(user, "left-shoulder", source="user", category="injury", summary="Bad left shoulder")
    make_memory(user, "breakfast", summary="Oats every morning")
    memory_off(user)
    model_server.queue_text("Let's plan your week.")

    received = stream(
        live_app, person, message_post(session=session_start(user=user), text="Plan my week", client_id=None)
    )

    request = first_request(model_server)
    prompt = ModelServer.system_prompt(request)
    assert received[-1][0] == "done"
    assert not request.get("tools")
    assert "<<MEMORIES" not in prompt and "Relationship stage" not in prompt
    assert "Bad left shoulder" not in prompt and "Oats every morning" not in prompt
    assert "This conversation is not remembered" in prompt
    assert [m["role"] for m in request["messages"]] == ["system", "user"]


def test_with_memory_off_a_model_calling_save_memory_anyway_writes_nothing_and_is_told_memory_is_off(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    make_memory(user, "breakfast", summary="Oats every morning")
    memory_off(user)
    before = memory_rows(user)
    model_server.queue_tool_calls(
        [
            ("save_memory", SHOULDER_SAVE),
            ("update_memory", {"key": "breakfast", "summary": "Eggs", "reason": "changed"}),
            ("delete_memory", {"key": "breakfast", "reason": "gone"}),
            ("recall_memory", {"keys": ["breakfast"]}),
        ]
    )
    model_server.queue_text("Noted for today.")

    received = stream(
        live_app, person, message_post(session=session_start(user=user), text="Bad shoulder", client_id=None)
    )

    assert received[-1][0] == "done"
    assert not [data for name, data in received if name == "memory"], "no memory cue is shown"
    assert memory_rows(user) == before
    results = tool_results(model_server)
    assert [r["status"] for r in results] == ["memory_off"] * 4
    assert all("memory is off" in r["error"] for r in results)
    # What the model asked to recall is not handed over.
    assert "Oats" not in json.dumps(results)
    # The second round, after the refusals, offers no tools either.
    assert not model_server.chat_requests()[1].get("tools")


def test_turning_memory_back_on_brings_the_same_memories_back_into_use(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    make_memory(user, "breakfast", summary="Oats every morning")
    memory_off(user)
    session = session_start(user=user)
    model_server.queue_text("Hello.")
    stream(live_app, person, message_post(session=session, text="Hi", client_id=None))

    user_memory_set(user=user, enabled=True)
    model_server.queue_text("Oats again?")
    stream(live_app, person, message_post(session=session_start(user=user), text="Breakfast ideas?", client_id=None))

    off, on = model_server.chat_requests()
    assert "Oats every morning" not in ModelServer.system_prompt(off) and not off.get("tools")
    assert "Oats every morning" in ModelServer.system_prompt(on)
    assert {tool["function"]["name"] for tool in on["tools"]} >= {"save_memory", "recall_memory"}
    # A conversation held while memory was off stays not remembered.
    assert ChatSession.objects.get(pk=session.pk).remembered is False


def test_memory_turned_off_mid_conversation_is_off_from_the_next_turn(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    make_memory(user, "breakfast", summary="Oats every morning")
    session = session_start(user=user)
    model_server.queue_text("Hello.")
    stream(live_app, person, message_post(session=session, text="Hi", client_id=None))

    memory_off(user)
    model_server.queue_tool_calls([("save_memory", TALK_SAVE)])
    model_server.queue_text("Good luck with it.")
    stream(live_app, person, message_post(session=session, text="I give a talk in June", client_id=None))

    before, after = model_server.chat_requests()[0], model_server.chat_requests()[1]
    assert "Oats every morning" in ModelServer.system_prompt(before) and before["tools"]
    assert "Oats every morning" not in ModelServer.system_prompt(after) and not after.get("tools")
    assert [m.key for m in Memory.objects.filter(user=user)] == ["breakfast"]


# A conversation that is not remembered ---------------------------------------------------------


def test_a_conversation_not_remembered_reads_no_memory_and_offers_no_tools(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    make_memory(user, "breakfast", summary="Oats every morning")
    model_server.queue_text("Happy to think it through.")

    session = session_start(user=user, remembered=False)
    stream(live_app, person, message_post(session=session, text="Something private", client_id=None))

    request = first_request(model_server)
    assert not request.get("tools")
    assert "Oats every morning" not in ModelServer.system_prompt(request)
    assert "<<MEMORIES" not in ModelServer.system_prompt(request)
    # Memory itself is still on for every other conversation.
    assert User.objects.get(pk=user.pk).memory_enabled


def sunday_evening_after(now: datetime, zone: str) -> datetime:
    """20:30 on the Sunday that ends the person's current week, on their clock."""
    local = now.astimezone(ZoneInfo(zone))
    sunday = local.date() + timedelta(days=7 - local.isoweekday())
    return datetime.combine(sunday, time(20, 30), tzinfo=ZoneInfo(zone))


@pytest.mark.django_db(transaction=True)
def test_a_conversation_not_remembered_leaves_no_memory_summary_or_email_behind(
    live_app: str, user: User, other_user: User, model_server: ModelServer, celery_eager: None
) -> None:
    """Two people, the same conversation, every background job run: the one who ticked
    "don't remember" has nothing left of it but the conversation itself; the other one
    (the control) gets the memory, the summary, the recap, the nudge and the week."""
    now = timezone.now()
    for someone in (user, other_user):
        reachable_now(someone, now, frequency="weekly", session_summaries=True)
        make_memory(someone, "breakfast", summary="Oats every morning")
    before = memory_rows(user)
    sessions = {}
    talk = {**TALK_SAVE, "due_at": (now + timedelta(days=3)).date().isoformat()}
    for someone, text, ticked in ((user, PRIVATE, True), (other_user, "I give a talk on Thursday", False)):
        client = Client()
        client.force_login(someone)
        # The model tries to save an intention with a date, in both conversations.
        model_server.queue_tool_calls([("save_memory", talk)])
        model_server.queue_text("Good luck with the talk.")
        posted = {"text": text, "client_id": str(uuid.uuid4())} | ({"not_remembered": "1"} if ticked else {})
        response = client.post("/chat/new", posted)
        session = ChatSession.objects.get(user=someone)
        assert response.status_code == 302 and response["Location"] == f"/chat/{session.pk}/"
        wait_for(lambda s=session: Message.objects.filter(session=s, role="assistant").exists())
        sessions[someone.pk] = session

    for session in sessions.values():
        session_end(session=session)
    summarise_ended_sessions()
    session_recaps_plan()
    # A nudge waits until the person's first day and their last message are well behind them.
    User.objects.filter(pk__in=sessions).update(date_joined=now - timedelta(days=2))
    ChatSession.objects.filter(pk__in=[s.pk for s in sessions.values()]).update(last_message_at=now - timedelta(days=1))
    nudges_plan()
    check_ins_plan(now=now)
    emails_dispatch_due()
    weekly_episodes_plan(now=sunday_evening_after(now, user.time_zone))

    private = ChatSession.objects.get(pk=sessions[user.pk].pk)
    assert private.remembered is False
    assert (private.summary, private.summarised_at) == ("", None)
    assert memory_rows(user) == before
    assert not Email.objects.filter(user=user).exists()
    assert not WeeklyEpisodeRequest.objects.filter(user=user).exists()
    assert [m.to for m in mail.outbox if user.email in m.to] == []
    # What was said stays, for the person (it is their conversation), and nothing else.
    assert Message.objects.filter(session=private, role="user").count() == 1

    control = ChatSession.objects.get(pk=sessions[other_user.pk].pk)
    assert control.remembered and control.summary and control.summarised_at
    assert Memory.objects.filter(user=other_user, tier="prospective").exists()
    assert Memory.objects.filter(user=other_user, category="episode").exists()
    assert set(Email.objects.filter(user=other_user).values_list("kind", flat=True)) >= {"session_summary", "nudge"}
    # Nothing of the private conversation reached any request but its own turn's two rounds
    # (no summary, recap, nudge or episode was drafted from it).
    assert sum(PRIVATE in json.dumps(r, ensure_ascii=False) for r in model_server.chat_requests()) == 2


def test_a_summary_task_for_a_conversation_not_remembered_does_nothing(user: User, model_server: ModelServer) -> None:
    session = make_session(user, "Something private", "I hear you.")
    ChatSession.objects.filter(pk=session.pk).update(remembered=False)
    session_end(session=session)

    assert summarise_ended_sessions() == 0
    summarise_session(session.pk)

    session.refresh_from_db()
    assert (session.summary, session.summarised_at) == ("", None)
    assert model_server.chat_requests() == []


def test_a_session_ending_while_memory_is_off_is_closed_without_a_summary(
    user: User, model_server: ModelServer, celery_eager: None
) -> None:
    session = make_session(user, "I ran 5 km", "Great.")
    memory_off(user)
    session_end(session=session)

    assert summarise_ended_sessions() == 1
    assert summarise_ended_sessions() == 0

    session.refresh_from_db()
    assert session.summary == "" and session.summarised_at is not None
    assert model_server.chat_requests() == []


@pytest.mark.django_db
def test_with_memory_off_no_email_is_planned_and_one_planned_before_is_skipped(
    user: User, model_server: ModelServer
) -> None:
    from emails.sending import email_send
    from tests.emails.factories import make_email, settled

    now = timezone.now()
    reachable_now(user, now, frequency="weekly", session_summaries=True)
    make_session(user, "Hello", "Hi!")
    settled(user)
    make_memory(user, "talk", tier="prospective", category="goal", due_at=now + timedelta(days=2))
    # Planned a while ago and kept back since (quiet hours, say): no gap stands in the way.
    planned_before = make_email(user, kind="nudge", period_key="earlier", created_at=now - timedelta(days=30))
    memory_off(user)

    assert nudges_plan(now=now) == 0
    assert check_ins_plan(now=now) == 0
    assert email_send(email_id=planned_before.pk, now=now) == "skipped"

    planned_before.refresh_from_db()
    assert (planned_before.status, planned_before.error) == ("skipped", "they turned memory off")
    assert list(Email.objects.filter(user=user).values_list("pk", flat=True)) == [planned_before.pk]
    assert model_server.chat_requests() == []
    # The same person was due both: with memory on again, they are planned.
    user_memory_set(user=user, enabled=True)
    assert nudges_plan(now=now) == 1


# The chat pages --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_new_conversation_page_offers_not_to_remember_it_and_a_link_ticks_the_box(
    client: Client, user: User
) -> None:
    client.force_login(user)

    plain = client.get("/chat/new").content.decode()
    ticked = client.get("/chat/new?not_remembered=1").content.decode()

    assert 'name="not_remembered" value="1" aria-describedby="not-remembered-hint"' in plain
    assert "t remember this conversation</label>" in plain and 'value="1" checked' not in plain
    assert 'value="1" checked' in ticked
    assert 'href="/chat/new?not_remembered=1"' in plain


@pytest.mark.django_db
def test_starting_a_temporary_conversation_over_htmx_marks_it_and_its_page_says_so(client: Client, user: User) -> None:
    client.force_login(user)
    remembered = make_session(user, "An ordinary chat", "Sure.")

    response = client.post(
        "/chat/new",
        {"text": "Something private", "client_id": str(uuid.uuid4()), "not_remembered": "1"},
        headers={"HX-Request": "true"},
    )

    private = ChatSession.objects.exclude(pk=remembered.pk).get(user=user)
    assert response.status_code == 200 and response["HX-Redirect"] == f"/chat/{private.pk}/"
    assert (private.remembered, private.temporary, remembered.remembered) == (False, True, True)
    page = client.get(f"/chat/{private.pk}/").content.decode()
    assert "Temporary conversation: deleted when you leave it." in page
    # Listed nowhere, its own page included: only the remembered one is.
    assert 'class="session-tag">Not remembered<' not in page and f'href="/chat/{private.pk}/"' not in page
    assert "Temporary conversation" not in client.get(f"/chat/{remembered.pk}/").content.decode()


@pytest.mark.django_db
def test_a_refused_first_message_keeps_the_box_ticked(client: Client, user: User) -> None:
    client.force_login(user)

    response = client.post("/chat/new", {"text": "   ", "client_id": str(uuid.uuid4()), "not_remembered": "1"})

    assert response.status_code == 422
    assert 'value="1" checked' in response.content.decode()
    assert not ChatSession.objects.filter(user=user).exists()


@pytest.mark.django_db
def test_with_memory_off_the_chat_says_so_and_every_new_conversation_is_not_remembered(
    client: Client, user: User
) -> None:
    client.force_login(user)
    started_before = make_session(user, "From before", "Hi.")
    memory_off(user)

    new_page = client.get("/chat/new").content.decode()
    client.post("/chat/new", {"text": "Hello again", "client_id": str(uuid.uuid4())})

    assert "Memory is off, so this conversation will not be remembered." in new_page
    assert 'name="not_remembered"' not in new_page and "not_remembered=1" not in new_page
    assert ChatSession.objects.exclude(pk=started_before.pk).get(user=user).remembered is False
    # One started while memory was on says memory is off now.
    assert "<strong>Memory is off.</strong>" in client.get(f"/chat/{started_before.pk}/").content.decode()
