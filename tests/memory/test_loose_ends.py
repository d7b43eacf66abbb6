"""Loose ends of the memory's promises, one test each, found by trying the app as a
hostile or careless model, and as a person with a long history, would."""

from __future__ import annotations

import hashlib
import json
from datetime import time, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

import memory.services
import memory.tool_writes
from accounts.forgetting import account_delete
from accounts.models import LoginSession, User
from coach.models import ChatSession
from coach.services import message_post, session_end
from coach.tasks import summarise_ended_sessions
from emails.planning import weekly_episodes_plan
from memory.drafts import MemoryDraft, ProposalDecided
from memory.models import Memory, MemoryEvent, MemoryProposal
from memory.proposals import proposal_confirm, proposal_make, proposal_reject
from memory.services import memory_save
from memory.tool_schemas import REASON_MAX_CHARS
from memory.tools import ToolContext, run_tool
from offline_coach import ModelServer
from tests.coach.factories import make_session
from tests.emails.factories import at, prefer
from tests.memory.factories import make_memories, make_memory, memory_named

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def call(context: ToolContext, name: str, **arguments: object) -> dict:
    return json.loads(run_tool(context, name, json.dumps(arguments)))


def update(context: ToolContext, key: str, **changes: object) -> dict:
    fields = {"summary": None, "content": None, "tier": None, "category": None, "due_at": None, "status": None}
    return call(context, "update_memory", key=key, **(fields | {"clear": None, "reason": "new detail"} | changes))


def save(context: ToolContext, key: str, summary: str, **fields: object) -> dict:
    arguments = {"key": key, "tier": "profile", "category": "preference", "summary": summary, "content": ""}
    return call(context, "save_memory", **(arguments | {"due_at": None, "keep_separate": None} | fields))


@pytest.fixture
def logged_in(client: Client, user: User) -> Client:
    client.force_login(user)
    return client


# The ceiling -----------------------------------------------------------------------------


def test_a_coach_that_saves_medical_notes_cannot_grow_the_store_past_the_ceiling(user: User, settings) -> None:
    # Twelve turns of "save a note, then call it medical" once left 120 memories against 60.
    # Moving a note into medical in place is now a suggestion (test_reclassifying.py); new
    # medical notes are saved, count toward the 60, and past it are refused.
    # The notes may look alike; this is about the ceiling.
    settings.MEMORY_DEDUP_THRESHOLD = settings.MEMORY_DEDUP_FAR_THRESHOLD = 1.01
    make_memories(user, 60)
    moved = update(ToolContext(user=user), "note-0", category="medical")
    for turn in range(80):
        save(
            ToolContext(user=user), f"likes-tea-{turn}", f"Likes tea number {turn} twist {turn * 7}", category="medical"
        )

    assert moved["status"] == "proposed"
    assert Memory.objects.filter(user=user).count() == 60
    assert Memory.objects.filter(user=user, category="medical").count() == 60
    refused = save(ToolContext(user=user), "one-more", "One more note on a quite different matter")
    assert refused["status"] == "not_saved" and "ceiling of 60" in refused["reason"]


def test_the_persons_own_writes_are_never_refused_for_space(user: User, logged_in: Client) -> None:
    for n in range(60):
        make_memory(user, f"medical-{n + 1}", category="medical", summary=f"Condition {n}")

    response = logged_in.post("/memories/add", {"summary": "Vegetarian", "tier": "profile", "category": "preference"})

    assert response.status_code == 302
    assert Memory.objects.filter(user=user).count() == 61


# update_memory ---------------------------------------------------------------------------


def test_an_intention_can_become_a_profile_note_by_clearing_its_date(user: User) -> None:
    make_memory(user, "write-daily", tier="prospective", category="habit", due_at=timezone.now() + timedelta(days=9))
    context = ToolContext(user=user)

    refused = update(context, "write-daily", tier="profile")
    cleared = update(context, "write-daily", tier="profile", clear=["due_at"])

    assert refused["status"] == "error" and "due_at" in refused["error"]
    assert cleared == {"status": "updated", "key": "write-daily"}
    memory = memory_named(user, "write-daily")
    assert (memory.tier, memory.due_at, memory.status) == ("profile", None, "")


def test_a_coach_update_never_undoes_a_change_made_while_it_was_embedding(
    user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_memory(user, "long-run", summary="Long run on Sundays")
    embed = memory.tool_writes.embed_memory

    def meanwhile_another_tab_saves(**text: str):
        # The embedding call is the window: another turn updates the same note meanwhile.
        monkeypatch.setattr(memory.tool_writes, "embed_memory", embed)
        current = memory_named(user, "long-run")
        changed = MemoryDraft.of(current)
        changed = MemoryDraft(**{**changed.__dict__, "summary": "Long run on Saturdays now"})
        memory_save(user=user, draft=changed, source="coach", actor="coach")
        return embed(**text)

    monkeypatch.setattr(memory.tool_writes, "embed_memory", meanwhile_another_tab_saves)
    result = update(ToolContext(user=user), "long-run", summary="Long run on Sundays, 20 km")

    assert result["status"] == "changed_meanwhile"
    assert result["memory"]["summary"] == "Long run on Saturdays now"
    assert memory_named(user, "long-run").summary == "Long run on Saturdays now"


def test_every_text_the_model_sends_has_a_length_limit(user: User) -> None:
    make_memory(user, "injury-1", source="user", category="injury")
    context = ToolContext(user=user)

    long_reason = call(context, "delete_memory", key="injury-1", reason="because " * 12_500)
    long_query = call(context, "search_memories", query="q" * 10_000, limit=None)
    long_keys = call(context, "recall_memory", keys=["k" * 65])

    assert long_reason["status"] == "error" and "reason" in long_reason["error"]
    assert long_query["status"] == "error" and "query" in long_query["error"]
    assert long_keys["status"] == "error"
    assert not MemoryProposal.objects.exists()
    assert call(context, "delete_memory", key="injury-1", reason="x" * REASON_MAX_CHARS)["status"] == "proposed"


# Proposals -------------------------------------------------------------------------------


def suggestion(user: User) -> MemoryProposal:
    memory = make_memory(user, "injury-1", source="user", category="injury", summary="Bad left knee")
    draft = MemoryDraft.of(memory)
    draft = MemoryDraft(**{**draft.__dict__, "summary": "Bad left knee, no lunges"})
    return proposal_make(user=user, memory=memory, kind="update", draft=draft, reason="they said so")


def test_confirming_a_suggestion_twice_says_it_was_answered_rather_than_failing(user: User, logged_in: Client) -> None:
    proposal = suggestion(user)

    first = logged_in.post(f"/memories/proposals/{proposal.pk}/confirm", headers=HTMX)
    second = logged_in.post(f"/memories/proposals/{proposal.pk}/confirm", headers=HTMX)
    rejected = logged_in.post(f"/memories/proposals/{proposal.pk}/reject")

    assert first.status_code == 200
    assert second.status_code == 409 and "answered already" in second.content.decode()
    assert rejected.status_code == 302
    assert memory_named(user, "injury-1").summary == "Bad left knee, no lunges"


def test_a_reject_racing_a_confirm_leaves_one_answer(user: User) -> None:
    proposal = suggestion(user)

    proposal_reject(user=user, proposal_id=proposal.pk)
    with pytest.raises(ProposalDecided):
        proposal_confirm(user=user, proposal_id=proposal.pk)

    assert MemoryProposal.objects.get().status == "rejected"
    assert memory_named(user, "injury-1").summary == "Bad left knee"


# Weekly episodes and sessions ------------------------------------------------------------


def test_a_weekly_episode_the_person_deleted_stays_deleted_for_its_week(
    user: User, celery_eager: None, django_capture_on_commit_callbacks, logged_in: Client
) -> None:
    zone = "Europe/Helsinki"
    prefer(user, time_zone=zone)
    sunday = at(zone, 2026, 11, 29, 20, 30)
    ChatSession.objects.create(user=user, last_message_at=sunday, summary="Ran 10k.", summarised_at=sunday)

    with django_capture_on_commit_callbacks(execute=True):
        assert weekly_episodes_plan(now=sunday) == 1
    episode = memory_named(user, "week-2026-48")
    logged_in.post(f"/memories/{episode.pk}/delete")
    with django_capture_on_commit_callbacks(execute=True):
        later_ticks = [weekly_episodes_plan(now=sunday + timedelta(hours=hour)) for hour in (1, 2, 3)]

    assert later_ticks == [0, 0, 0]
    assert not Memory.objects.filter(user=user, category="episode").exists()


def test_a_session_reopened_after_it_ended_is_summarised_again(
    user: User, model_server: ModelServer, celery_eager: None, django_capture_on_commit_callbacks
) -> None:
    session = make_session(user, "I ran 5k", "Well done.")
    session_end(session=session)
    summarise_ended_sessions()
    first = ChatSession.objects.get(pk=session.pk).summary

    message_post(session=session, text="And I signed up for a half marathon in April", client_id=None)
    reopened = ChatSession.objects.get(pk=session.pk)
    assert reopened.summarised_at is None and reopened.ended_at is None
    session_end(session=reopened)
    summarise_ended_sessions()

    again = ChatSession.objects.get(pk=session.pk)
    assert again.summarised_at is not None
    assert "half marathon" in model_server.chat_requests()[-1]["messages"][-1]["content"]
    assert again.summary != "" and first != ""


# Dates -----------------------------------------------------------------------------------


@pytest.mark.parametrize("zone", ["Pacific/Honolulu", "Pacific/Kiritimati", "UTC"])
def test_a_date_only_intention_is_due_on_the_persons_own_morning(user: User, zone: str) -> None:
    user.time_zone = zone
    result = save(
        ToolContext(user=user, time_zone=zone),
        "talk",
        "Talk at the meetup",
        tier="prospective",
        category="project",
        due_at="2031-06-12",
    )

    due = memory_named(user, result["key"]).due_at.astimezone(ZoneInfo(zone))
    assert (due.date().isoformat(), due.time()) == ("2031-06-12", time(9, 0))


def test_the_memory_page_takes_the_persons_date_as_their_own_morning(user: User, logged_in: Client) -> None:
    User.objects.filter(pk=user.pk).update(time_zone="Pacific/Honolulu")
    logged_in.post(
        "/memories/add",
        {"summary": "Talk at the meetup", "tier": "prospective", "category": "project", "due_date": "2031-06-12"},
    )

    due = Memory.objects.get(user=user).due_at.astimezone(ZoneInfo("Pacific/Honolulu"))
    assert (due.date().isoformat(), due.time()) == ("2031-06-12", time(9, 0))


# Long lists ------------------------------------------------------------------------------


def forget(user: User, count: int) -> None:
    now = timezone.now()
    MemoryEvent.objects.bulk_create(
        MemoryEvent(
            user=user,
            memory_id=10_000_000 + n,
            key=f"note-{n}",
            actor="system",
            action="evicted",
            reason="the oldest of the coach's session notes",
            before=json.dumps(
                {
                    "key": f"note-{n}",
                    "tier": "episodic",
                    "category": "habit",
                    "source": "coach",
                    "summary": f"Forgotten note number {n}, " + "with some words " * 5,
                    "content": "x" * 400,
                    "due_at": None,
                    "status": "",
                }
            ),
            created_at=now - timedelta(minutes=n),
        )
        for n in range(count)
    )


def test_500_forgotten_notes_come_a_page_at_a_time(user: User, logged_in: Client) -> None:
    forget(user, 500)

    page = logged_in.get("/memories/")
    html = page.content.decode()
    more = logged_in.get("/memories/forgotten/?page=2", headers=HTMX).content.decode()
    last = logged_in.get("/memories/forgotten/?page=25", headers=HTMX).content.decode()

    assert len(page.content) < 100_000
    assert html.count('class="forgotten"') == 20 and "Show more forgotten notes" in html
    assert more.count('class="forgotten"') == 20 and "Forgotten note number 20," in more
    assert last.count('class="forgotten"') == 20 and "Show more forgotten notes" not in last


def test_a_long_history_comes_a_page_at_a_time(user: User, logged_in: Client) -> None:
    memory = make_memory(user, "oats")
    for n in range(120):
        MemoryEvent.objects.create(
            user=user, memory_id=memory.pk, key="oats", actor="coach", action="updated", reason=f"change {n}"
        )

    first = logged_in.get(f"/memories/{memory.pk}/").content.decode()
    third = logged_in.get(f"/memories/{memory.pk}/history?page=3", headers=HTMX).content.decode()

    assert first.count('class="history-entry') == 50 and "Show older history" in first
    assert "Change 119" in first and "Change 70" in first and "Change 69" not in first
    assert third.count('class="history-entry') == 20 and "Show older history" not in third


# Erasure ---------------------------------------------------------------------------------


def test_erasing_the_account_ends_every_login_and_forgets_the_rate_limit_counts(user: User, client: Client) -> None:
    other_browser = Client()
    other_browser.force_login(user)
    client.post("/accounts/login/", {"login": user.email, "password": "wrong"})
    theirs = hashlib.sha256(f"testserver:{user.email}".encode()).hexdigest()
    redis = cache._cache.get_client()
    assert LoginSession.objects.filter(user=user).exists()
    assert [key for key in redis.keys("*allauth:rl:*") if key.decode().endswith(theirs)]

    account_delete(user=user, hosts=["testserver"])

    assert not LoginSession.objects.exists()
    assert not [key for key in redis.keys("*allauth:rl:*") if key.decode().endswith(theirs)]
    assert other_browser.get("/memories/").status_code == 302
