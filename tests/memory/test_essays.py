"""The memory as its three essays (shared/seeds) have it, where they speak:

- 000: safety is never held back; keeping too much of it is "mildly wasteful, never wrong";
- 003: the profile card is what the coach always sees; a new person is listened to, with a
  low bar for saving; intentions are remembered, with or without a date;
- 002: an index, one line per entry, by topic; feedback memories carry a Why and a How to
  apply; and what is kept stays bounded, history included.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from accounts.export import account_export
from accounts.models import User
from accounts.pages import MemoryFilters
from accounts.selectors import memory_page_for_user
from accounts.services import onboarding_complete
from coach.conversation import system_prompt
from emails.models import Email
from emails.planning import check_ins_plan
from memory.context import TOPIC_ORDER, assemble_memory_context
from memory.drafts import MemoryDraft
from memory.maintenance import memory_history_prune
from memory.models import Memory, MemoryEvent
from memory.services import memory_add_by_user, memory_save
from memory.tools import ToolContext, run_tool
from offline_coach import ModelServer
from tests.conftest import make_user
from tests.emails.factories import reachable_now
from tests.memory.factories import make_memory, memory_named

pytestmark = pytest.mark.django_db

MINILM = "all-MiniLM-L6-v2"


@pytest.fixture
def semantic(settings, model_server: ModelServer) -> ModelServer:
    settings.EMBEDDING_MODEL = MINILM
    settings.MEMORY_DEDUP_THRESHOLD = settings.CALIBRATED_DEDUP_THRESHOLDS[MINILM]
    settings.MEMORY_DEDUP_FAR_THRESHOLD = settings.CALIBRATED_DEDUP_FAR_THRESHOLDS[MINILM]
    return model_server


def save(user: User, key: str, summary: str, content: str = "", **fields: object) -> dict:
    arguments = {
        "key": key,
        "tier": "profile",
        "category": "habit",
        "summary": summary,
        "content": content,
        "due_at": None,
        "keep_separate": None,
    }
    return json.loads(run_tool(ToolContext(user=user), "save_memory", json.dumps(arguments | fields)))


# 000: safety before dedup ------------------------------------------------------------------


def test_the_shoulder_the_coach_notes_again_is_kept_beside_the_persons_and_offered_to_merge(
    user: User, semantic: ModelServer, client: Client
) -> None:
    typed = memory_add_by_user(
        user=user,
        draft=MemoryDraft(
            key="", tier="profile", category="injury", summary="Bad left shoulder, no overhead pressing", content=""
        ),
    )

    result = save(
        user,
        "left-shoulder-impingement",
        "Left shoulder impingement, no overhead pressing or dips",
        category="injury",
    )

    assert result["status"] == "saved", result
    assert [overlap["key"] for overlap in result["overlaps"]] == [typed.key]
    prompt, _ = system_prompt(user=user, now=timezone.now(), remembers=True)
    assert "Bad left shoulder, no overhead pressing" in prompt and "overhead pressing or dips" in prompt

    client.force_login(user)
    page = client.get("/memories/").content.decode()
    assert "These look alike: merge?" in page and "Merge into one" in page
    overlap = memory_page_for_user(user=user, filters=MemoryFilters(), now=timezone.now()).overlaps[0]
    merged = client.post(f"/memories/overlaps/{overlap.overlap.pk}/merge", headers={"HX-Request": "true"})

    assert merged.status_code == 200 and "Merged into one." in merged.content.decode()
    kept = Memory.objects.get(user=user)
    assert kept.pk == typed.pk and kept.source == "manual" and kept.category == "injury"
    assert "dips" in kept.content and "Bad left shoulder" in kept.summary
    assert "These look alike" not in client.get("/memories/").content.decode()


def test_keeping_both_stops_offering_the_pair(user: User, semantic: ModelServer, client: Client) -> None:
    memory_add_by_user(
        user=user,
        draft=MemoryDraft(key="", tier="profile", category="allergy", summary="Allergic to peanuts", content=""),
    )
    save(user, "cashews", "Allergic to cashews", category="allergy")
    overlap = memory_page_for_user(user=user, filters=MemoryFilters(), now=timezone.now()).overlaps[0]
    client.force_login(user)

    client.post(f"/memories/overlaps/{overlap.overlap.pk}/dismiss")

    assert Memory.objects.filter(user=user).count() == 2
    assert "These look alike" not in client.get("/memories/").content.decode()


def test_an_ordinary_near_copy_is_still_flagged_rather_than_saved(user: User, semantic: ModelServer) -> None:
    save(user, "breakfast", "Breakfast is always oats")

    assert save(user, "oats", "Eats oats every morning for breakfast")["status"] == "not_saved"


# 003: the profile card, the stage, intentions ------------------------------------------------


def test_sixty_coach_notes_after_a_profile_fact_forget_the_oldest_session_note_not_the_profile_fact(
    user: User, client: Client
) -> None:
    start = timezone.now() - timedelta(days=90)
    photographer = make_memory(
        user,
        "memoir",
        tier="profile",
        category="background",
        summary="Photographer working on a memoir",
        updated_at=start,
    )
    for n in range(60):
        memory_save(
            user=user,
            draft=MemoryDraft(
                key=f"oats-{n}",
                tier="episodic",
                category="habit",
                summary=f"Oats for breakfast again, day {n}",
                content="",
            ),
            source="coach",
            actor="coach",
            now=start + timedelta(days=1, hours=n),
        )

    assert Memory.objects.filter(user=user).count() == 60
    assert Memory.objects.filter(pk=photographer.pk).exists()
    assert not Memory.objects.keyed(user.pk, "oats-0").exists()
    evicted = MemoryEvent.objects.get(user=user, action="evicted")
    assert evicted.reason.startswith("the oldest of the coach's session notes")
    page = memory_page_for_user(user=user, filters=MemoryFilters(), now=timezone.now())
    assert [row.memory.key for row in page.next_to_forget] == [f"oats-{n}" for n in range(1, 6)]
    order = [row.memory.summary for row in page.next_to_forget]
    assert "Photographer working on a memoir" not in order


def test_five_onboarding_answers_start_the_relationship_at_new(model_server: ModelServer) -> None:
    # Onboarding is taken once: a person who has not answered yet.
    user = make_user("newcomer@example.com", onboarded=False)
    answers = {
        "working-on": "A memoir",
        "goals": "Finish the first draft",
        "health": "Bad left knee",
        "schedule": "Mornings before work",
        "coaching-style": "Blunt, please",
    }

    onboarding_complete(user=user, answers=answers)
    context = assemble_memory_context(user=user, now=timezone.now())

    assert Memory.objects.filter(user=user).count() == 5
    assert context.stage == "new" and context.learned == 0
    assert "the bar for saving is low" in context.text


def test_an_undated_intention_comes_up_in_the_next_conversation_and_in_no_email(
    user: User, model_server: ModelServer
) -> None:
    reachable_now(user)
    result = save(user, "pacing-later", "Come back to their pacing at some point", tier="prospective")

    prompt, _ = system_prompt(user=user, now=timezone.now(), remembers=True)
    planned = [check_ins_plan(now=timezone.now() + timedelta(days=days)) for days in (0, 1, 7, 45)]

    assert result["status"] == "saved"
    memory = memory_named(user, "pacing-later")
    assert memory.due_at is None and memory.status == "open"
    line = next(line for line in prompt.splitlines() if "Come back to their pacing" in line)
    assert line.endswith("Come back to their pacing at some point (raise it now)")
    assert planned == [0, 0, 0, 0] and not Email.objects.exists()


def test_the_offline_coach_remembers_an_intention_without_a_date(user: User, model_server: ModelServer) -> None:
    from datetime import date

    from offline_coach.statements import notes_in

    notes = notes_in("Let's come back to my pacing at some point.", today=date(2026, 12, 1))

    assert [(n.key, n.tier, n.due_at) for n in notes] == [("pacing-later", "prospective", None)]


# 002: the cabinet's index, feedback's shape, a bounded history --------------------------------


def test_at_the_ceiling_every_memory_has_its_index_line_once_grouped_by_topic(user: User) -> None:
    categories = ["injury", "allergy", "goal", "habit", "schedule", "preference", "project", "background"]
    for n in range(60):
        make_memory(
            user,
            f"note-{n}",
            category=categories[n % len(categories)],
            summary=f"Summary of note {n} " + "x" * 100,
            content="Long content. " * 140,
        )
    for week in range(14):
        make_memory(user, f"week-2026-{week:02d}", category="episode", summary=f"Week {week} summary")

    text = assemble_memory_context(user=user, now=timezone.now()).text

    for memory in Memory.objects.filter(user=user):
        assert text.count(f"- {memory.key} (") == 1, memory.key
    headers = [_topic(line) for line in text.splitlines() if _topic(line)]
    assert headers == [topic for topic in TOPIC_ORDER if topic in {*categories, "episode"}]
    current = None
    for line in text.splitlines():
        if _topic(line):
            current = _topic(line)
        elif line.startswith("- note-"):
            assert memory_named(user, line[2:].split(" ")[0]).category == current


def _topic(line: str) -> str | None:
    """The topic a heading of the memory block names ("## injury (kept for good)")."""
    if not line.startswith("## "):
        return None
    topic = line[3:].split(" ")[0]
    return topic if topic in TOPIC_ORDER else None


def test_a_feedback_memory_without_its_why_and_how_to_apply_is_refused_saying_what_is_missing(
    user: User,
) -> None:
    bare = save(user, "style", "Wants blunt feedback", "Give blunt feedback.", category="feedback")
    half = save(user, "style", "Wants blunt feedback", "Give blunt feedback.\nWhy: they asked.", category="feedback")
    whole = save(
        user,
        "style",
        "Wants blunt feedback",
        "Give blunt feedback.\nWhy: they asked for it after a vague review.\nHow to apply: say plainly what to change.",
        category="feedback",
    )

    assert bare["status"] == "error" and "'Why:'" in bare["error"] and "'How to apply:'" in bare["error"]
    assert half["status"] == "error" and "'Why:'" not in half["error"] and "'How to apply:'" in half["error"]
    assert whole["status"] == "saved"


def test_after_the_restore_window_a_forgotten_memory_keeps_no_text_in_its_history(user: User, settings) -> None:
    start = timezone.now() - timedelta(days=60)
    old = make_memory(user, "oats-old", summary="Oats with honey, a secret recipe", updated_at=start)
    memory_save(
        user=user,
        draft=MemoryDraft(key="oats-old", tier="episodic", category="habit", summary="Oats with honey", content=""),
        source="coach",
        actor="coach",
        reason="they said so on a Tuesday",
        now=start,
    )
    for n in range(59):
        make_memory(user, f"newer-{n}", updated_at=start + timedelta(days=1, minutes=n))
    memory_save(
        user=user,
        draft=MemoryDraft(key="one-more", tier="episodic", category="habit", summary="One more", content=""),
        source="coach",
        actor="coach",
        now=start + timedelta(days=2),
    )
    assert not Memory.objects.filter(pk=old.pk).exists()

    dropped, _ = memory_history_prune(now=start + timedelta(days=2 + settings.MEMORY_FORGOTTEN_DAYS + 1))

    assert dropped >= 2
    with connection.cursor() as cursor:
        cursor.execute("SELECT action, key, before, after FROM memory_memoryevent WHERE memory_id = %s", [old.pk])
        rows = cursor.fetchall()
    assert {row[0] for row in rows} == {"updated", "evicted"}
    assert all(row[1] is None and row[2] is None and row[3] is None for row in rows), rows
    reasons = dict(MemoryEvent.objects.filter(memory_id=old.pk).values_list("action", "reason"))
    assert reasons["updated"] == "" and reasons["evicted"].startswith("the oldest of the coach's session notes")
    exported = account_export(user=user, now=timezone.now())["history_of_memories_no_longer_kept"]
    assert [[event["action"] for event in item["history"]] for item in exported] == [["updated", "evicted"]]


def test_a_persons_history_stays_under_its_bound(user: User, settings) -> None:
    settings.MEMORY_HISTORY_MAX_EVENTS = 50
    memory = make_memory(user, "oats")
    long_ago = timezone.now() - timedelta(days=200)
    MemoryEvent.objects.bulk_create(
        MemoryEvent(
            user=user,
            memory_id=memory.pk,
            key="oats",
            actor="coach",
            action="updated",
            created_at=long_ago + timedelta(hours=n),
        )
        for n in range(120)
    )
    recent = [
        MemoryEvent.objects.create(user=user, memory_id=memory.pk, key="oats", actor="coach", action="updated")
        for _ in range(60)
    ]

    memory_history_prune()

    remaining = MemoryEvent.objects.filter(user=user)
    assert remaining.count() == 60
    assert set(remaining.values_list("pk", flat=True)) == {event.pk for event in recent}
