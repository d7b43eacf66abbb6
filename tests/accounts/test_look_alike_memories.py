"""These look alike: merge? The person told onboarding about a bad knee and a peanut
allergy; later the coach notes the knee again, and the allergy with more to it. The memory
page offers each pair, and merging keeps the person's memory, with the coach's detail."""

from __future__ import annotations

import json
import re

import pytest
from asgiref.sync import async_to_sync
from django.test import Client
from django.utils import timezone

from accounts.models import User
from coach.services import message_post, session_start
from coach.turn import turn_run
from infra import llm
from memory.context import assemble_memory_context
from memory.drafts import MemoryDraft
from memory.embeddings import memory_text
from memory.models import Memory, MemoryOverlap
from memory.policy import USER_SOURCES
from memory.services import memory_save
from offline_coach import ModelServer, minilm

HTMX = {"HX-Request": "true"}


def coach_note(key: str, category: str, summary: str) -> dict:
    return {
        "key": key,
        "tier": "profile",
        "category": category,
        "summary": summary,
        "content": summary,
        "due_at": None,
        "keep_separate": None,
    }


def onboarding_memory(user: User, key: str, category: str, summary: str) -> Memory:
    """What onboarding keeps of one answer: the person's own words, theirs and protected."""
    draft = MemoryDraft(key=key, tier="profile", category=category, summary=summary, content=summary)
    embedding = llm.embed([memory_text(summary=summary, content=summary)])[0]
    return memory_save(user=user, draft=draft, source="onboarding", actor="user", embedding=embedding).memory


def overlap_pairs(page: str) -> list[tuple[tuple[str, str], ...]]:
    """Each pair offered, as (who wrote it, what it says) for both memories."""
    section = re.search(r'<section class="card overlaps" id="overlaps".*?</section>', page, re.S)
    assert section, "no look-alike memories offered"
    return [
        tuple(re.findall(r'<span class="label">([^<]*)</span><p>([^<]*)</p>', article))
        for article in re.findall(r'<article class="overlap".*?</article>', section.group(0), re.S)
    ]


@pytest.mark.parametrize("embedding_model", ["bag-of-words", "all-MiniLM-L6-v2"])
def test_the_coachs_notes_that_read_like_onboarding_answers_are_offered_to_merge_and_merge_into_the_persons(
    transactional_db: None, user: User, model_server: ModelServer, settings, embedding_model: str
) -> None:
    if embedding_model == minilm.MODEL_NAME:
        # Loaded before the clock starts: on a busy machine loading it outlasts a request's wait.
        minilm.preload()
    settings.EMBEDDING_MODEL = embedding_model
    settings.MEMORY_DEDUP_THRESHOLD = settings.CALIBRATED_DEDUP_THRESHOLDS.get(embedding_model, 0.8)
    settings.MEMORY_DEDUP_FAR_THRESHOLD = settings.CALIBRATED_DEDUP_FAR_THRESHOLDS.get(embedding_model, 0.95)
    knee = onboarding_memory(user, "knee", "injury", "Bad left knee")
    peanuts = onboarding_memory(user, "peanuts", "allergy", "Allergic to peanuts")
    # The coach saves both through the real tool path, in one turn.
    model_server.queue_tool_calls(
        [
            ("save_memory", coach_note("left-knee", "injury", "Bad left knee")),
            ("save_memory", coach_note("nut-allergy", "allergy", "Allergic to peanuts and cashews")),
        ]
    )
    model_server.queue_text("Noted: we'll keep your knee and the nuts in mind.")
    message = message_post(session=session_start(user=user), text="My knee is bad, and cashews too.", client_id=None)
    async_to_sync(turn_run)(user_id=user.pk, message_id=message.pk)

    results = [json.loads(m["content"]) for m in model_server.chat_requests()[1]["messages"] if m["role"] == "tool"]
    assert [r["status"] for r in results] == ["saved", "saved"], results
    assert Memory.objects.filter(user=user).count() == 4
    client = Client()
    client.force_login(user)

    page = client.get("/memories/").content.decode()

    assert "These look alike: merge?" in page
    assert sorted(overlap_pairs(page)) == [
        (("From your onboarding", "Allergic to peanuts"), ("Your coach wrote this", "Allergic to peanuts and cashews")),
        (("From your onboarding", "Bad left knee"), ("Your coach wrote this", "Bad left knee")),
    ]

    for overlap in MemoryOverlap.objects.filter(user=user):
        merged = client.post(f"/memories/overlaps/{overlap.pk}/merge", headers=HTMX)
        assert merged.status_code == 200 and "Merged into one." in merged.content.decode()
    # The counts at the top follow, in place.
    counts = re.search(
        r'<ul class="stats" id="memory-counts"[^>]*hx-swap-oob="true">(.*?)</ul>', merged.content.decode(), re.S
    )
    assert " ".join(re.sub(r"<[^>]+>", " ", counts.group(1)).split()) == "2 memories 2 kept for good 0 emails sent"

    kept = {m.pk: m for m in Memory.objects.filter(user=user)}
    assert set(kept) == {knee.pk, peanuts.pk}
    for memory in kept.values():
        assert memory.source in USER_SOURCES and memory.is_protected
    assert (kept[knee.pk].summary, kept[knee.pk].content, kept[knee.pk].category) == (
        "Bad left knee",
        "Bad left knee",
        "injury",
    )
    # The coach's extra detail is not lost: the person's memory now says it.
    allergy = kept[peanuts.pk]
    assert allergy.category == "allergy" and "cashews" in allergy.summary and "cashews" in allergy.content
    assert "These look alike" not in client.get("/memories/").content.decode()
    assert "cashews" in assemble_memory_context(user=user, now=timezone.now()).text


def test_a_memory_added_on_the_page_that_reads_like_one_kept_is_saved_and_offered_to_merge(
    user: User, model_server: ModelServer, settings
) -> None:
    settings.MEMORY_DEDUP_THRESHOLD = settings.CALIBRATED_DEDUP_THRESHOLDS["bag-of-words"]
    settings.MEMORY_DEDUP_FAR_THRESHOLD = settings.CALIBRATED_DEDUP_FAR_THRESHOLDS["bag-of-words"]
    onboarding_memory(user, "shellfish", "allergy", "Allergic to shellfish")
    onboarding_memory(user, "runs", "habit", "Runs on Saturday mornings")
    client = Client()
    client.force_login(user)

    response = client.post(
        "/memories/add",
        {"summary": "Shellfish allergy: no prawns", "content": "", "category": "allergy", "tier": "profile"},
        headers=HTMX,
    )

    page = response.content.decode()
    assert response.status_code == 200 and "Saved." in page
    assert "It reads like “Allergic to shellfish” (the word shellfish; close in meaning" in page
    assert Memory.objects.filter(user=user).count() == 3
    (overlap,) = MemoryOverlap.objects.filter(user=user)
    assert overlap.other.summary == "Allergic to shellfish"
    pairs = overlap_pairs(client.get("/memories/").content.decode())
    offered = [tuple(text for _, text in pair) for pair in pairs]
    assert offered == [("Allergic to shellfish", "Shellfish allergy: no prawns")]


def test_a_memory_added_on_the_page_unlike_any_other_is_offered_with_nothing(
    user: User, model_server: ModelServer
) -> None:
    onboarding_memory(user, "shellfish", "allergy", "Allergic to shellfish")
    client = Client()
    client.force_login(user)

    response = client.post(
        "/memories/add", {"summary": "Runs on Saturday mornings", "content": "", "category": "habit", "tier": "profile"}
    )

    assert response.status_code == 302
    assert not MemoryOverlap.objects.filter(user=user).exists()
