"""Near-copies are flagged only when they are near: close in meaning and sharing a word, or
far closer than that. A trip and an injury of the same sport are two facts; five ways of
saying one event, saved in one response, are one memory and four flags naming it; the flag
says what matched and offers keeping both as plainly as merging."""

from __future__ import annotations

import json

import pytest

from accounts.models import User
from memory.models import Memory
from memory.near_copies import is_near
from memory.retrieval import Why
from memory.tools import ToolContext, run_tool
from offline_coach import ModelServer, minilm
from offline_coach.minilm import MODEL_NAME as MINILM

pytestmark = pytest.mark.django_db

INJURY = "A2 pulley injury, no max hangs until the physio clears it"
TRIP = "Training for a climbing trip to Kalymnos in May"
READING = (
    "The reading at Rönnells went well",
    "Felt confident at the Rönnells reading",
    "The Rönnells reading was a success",
    "Reading at the Rönnells bookshop went really well",
    "Gave a successful reading at Rönnells",
)


def save_call(key: str, summary: str, category: str = "background", keep_separate: bool | None = None) -> dict:
    return {
        "key": key,
        "tier": "episodic",
        "category": category,
        "summary": summary,
        "content": summary,
        "due_at": None,
        "keep_separate": keep_separate,
    }


def saved(context: ToolContext, **arguments: object) -> dict:
    return json.loads(run_tool(context, "save_memory", json.dumps(arguments)))


@pytest.fixture
def calibrated(settings, model_server: ModelServer):
    """The app on an embedding model at its calibrated thresholds."""

    def use(model: str) -> None:
        if model == MINILM:
            minilm.preload()
        settings.EMBEDDING_MODEL = model
        settings.MEMORY_DEDUP_THRESHOLD = settings.CALIBRATED_DEDUP_THRESHOLDS[model]
        settings.MEMORY_DEDUP_FAR_THRESHOLD = settings.CALIBRATED_DEDUP_FAR_THRESHOLDS[model]

    return use


def test_a_climbing_trip_is_saved_beside_a_finger_injury_of_the_same_sport(user: User, calibrated) -> None:
    calibrated(MINILM)
    context = ToolContext(user=user)
    assert saved(context, **save_call("finger", INJURY, category="injury"))["status"] == "saved"

    result = saved(context, **save_call("kalymnos", TRIP, category="goal"))

    assert result["status"] == "saved"
    assert Memory.objects.filter(user=user).count() == 2


@pytest.mark.parametrize("model", [MINILM, "bag-of-words"])
def test_five_paraphrases_of_one_event_saved_in_one_response_leave_one_memory_and_four_flags_naming_it(
    user: User, calibrated, model: str
) -> None:
    calibrated(model)
    context = ToolContext(user=user)

    results = [saved(context, **save_call(f"reading-{n}", text)) for n, text in enumerate(READING)]

    assert [r["status"] for r in results] == ["saved", *["not_saved"] * 4]
    for result in results[1:]:
        (first, *_) = result["duplicates"]
        assert first["key"] == "reading-0"
        assert "rönnells" in first["matched"].lower() and "reading" in first["matched"].lower()
    assert Memory.objects.filter(user=user).count() == 1


def test_the_flag_says_what_matched_and_offers_keeping_both_as_plainly_as_merging(user: User, calibrated) -> None:
    calibrated(MINILM)
    context = ToolContext(user=user)
    saved(context, **save_call("reading", READING[0]))

    flag = saved(context, **save_call("reading-again", READING[2]))

    assert flag["status"] == "not_saved"
    assert flag["duplicates"][0]["matched"].startswith("the words rönnells, reading; close in meaning (0.")
    assert flag["choices"][0].startswith("keep_separate: different facts")
    assert [choice.split(":")[0] for choice in flag["choices"]] == ["keep_separate", "merge", "replace", "skip"]
    # Keeping both is one more call, never a second refusal.
    kept = saved(context, **save_call("reading-again", READING[2], keep_separate=True))
    assert kept["status"] == "saved"


def test_meaning_alone_flags_only_far_above_the_threshold(settings) -> None:
    settings.MEMORY_DEDUP_THRESHOLD, settings.MEMORY_DEDUP_FAR_THRESHOLD = 0.41, 0.62

    assert not is_near(Why(similarity=0.59, by_meaning=True))
    assert is_near(Why(words=("reading",), similarity=0.45, by_meaning=True))
    assert is_near(Why(similarity=0.63, by_meaning=True))
    assert not is_near(Why(words=("reading",), similarity=0.40, by_meaning=True))
    # Found by its words alone (embedded by another model): never near.
    assert not is_near(Why(words=("reading",), similarity=None))
