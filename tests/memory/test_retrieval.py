"""Finding a person's memories again, by their words and their meaning fused: a shared word
brings up what meaning alone misses, each memory found says why, the words are stored as
keyed hashes that no one can read, and whatever a query holds, the search answers with the
person's own memories or a clear refusal, never another person's."""

from __future__ import annotations

import json
import re

import pytest
from django.core.management import call_command
from django.db import connection
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from accounts.models import User
from infra.hashed_words import hashed_words, query_words, word_hash, words
from memory.models import Memory
from memory.tools import ToolContext, run_tool
from offline_coach import ModelServer, minilm
from offline_coach.minilm import MODEL_NAME as MINILM
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db

INJURY = "A2 pulley injury, no max hangs until the physio clears it"
MINE = (
    ("finger-injury", "injury", INJURY),
    ("trip", "goal", "Training for a climbing trip to Kalymnos in May"),
    ("breakfast", "habit", "Oats with berries for breakfast every day"),
    ("sleep", "habit", "Sleeps badly before early meetings"),
    ("bike", "habit", "Cycles to work three days a week"),
)
THEIRS = (
    ("their-injury", "injury", "Torn hamstring, no sprints, hangs are fine"),
    ("their-talk", "goal", "Keynote at PyCon in June"),
)


def search(user: User, query: object, limit: object = None) -> dict:
    return json.loads(run_tool(ToolContext(user=user), "search_memories", json.dumps({"query": query, "limit": limit})))


def memories_of(user: User, notes: tuple[tuple[str, str, str], ...]) -> None:
    for key, category, summary in notes:
        make_memory(user, key, category=category, summary=summary)


def test_asking_about_fingerboard_hangs_brings_up_the_finger_injury_by_the_shared_word(
    user: User, model_server: ModelServer, settings
) -> None:
    minilm.preload()
    settings.EMBEDDING_MODEL = MINILM
    memories_of(user, MINE)
    call_command("reembed_memories")

    found = search(user, "Can I do fingerboard hangs?")["memories"]

    assert found[0]["key"] == "finger-injury"
    assert found[0]["found_by"].startswith("the word hangs;")


def test_each_memory_found_says_whether_its_words_its_meaning_or_both_found_it(
    user: User, model_server: ModelServer
) -> None:
    make_memory(user, "swims", summary="Swims on Tuesdays")
    make_memory(user, "oats", summary="Oats for breakfast every morning")

    found = {m["key"]: m for m in search(user, "swims tuesdays")["memories"]}

    assert found["swims"]["found_by"].startswith("the words swims, tuesdays; close in meaning")
    # Nothing in common but being one of the person's few memories: meaning alone ranks it.
    assert found["oats"]["found_by"].startswith("close in meaning")
    assert found["swims"]["similarity"] > found["oats"]["similarity"]


def test_the_words_still_find_when_the_embedding_model_fails(user: User, model_server: ModelServer) -> None:
    memories_of(user, MINE)
    model_server.queue_embedding_error(503)

    result = search(user, "fingerboard hangs")

    assert result["status"] == "found" and "words alone" in result["note"]
    assert [m["key"] for m in result["memories"]] == ["finger-injury"]
    assert result["memories"][0]["found_by"] == "the word hangs"


def test_a_memory_in_chinese_or_arabic_is_found_by_its_own_words(user: User, model_server: ModelServer) -> None:
    make_memory(user, "zh", summary="我的膝盖受伤了 不能跑步")
    make_memory(user, "ar", summary="لدي حساسية من الفول السوداني")
    make_memory(user, "en", summary="Runs on Saturdays")

    assert search(user, "膝盖受伤")["memories"][0]["key"] == "zh"
    assert search(user, "حساسية")["memories"][0]["key"] == "ar"


def test_the_words_of_a_memory_are_stored_as_keyed_hashes_that_differ_for_each_person(
    user: User, other_user: User
) -> None:
    make_memory(user, "injury", summary=INJURY)
    make_memory(other_user, "injury", summary=INJURY)

    with connection.cursor() as cursor:
        cursor.execute("SELECT user_id, words::text FROM memory_memory ORDER BY user_id")
        stored = dict(cursor.fetchall())

    for text in stored.values():
        # Nothing but hashes and positions: no word, in any form, is there to read.
        assert re.fullmatch(r"('[0-9a-f]{16}':[0-9,]+ ?)+", text)
    # The same words, two people: not one hash in common, so nothing matches across people.
    hashes = [set(re.findall(r"[0-9a-f]{16}", text)) for text in stored.values()]
    assert hashes[0] and not hashes[0] & hashes[1]
    assert word_hash(user.pk, "hang") != word_hash(other_user.pk, "hang")


def test_words_are_lower_cased_stemmed_and_stripped_of_stop_words() -> None:
    assert words("I was Hanging on the fingerboard; hangs, hanged!") == ["hang", "fingerboard", "hang", "hang"]
    assert words("Injuries and an injury") == ["injury", "injury"]
    assert words("the of and i my") == []
    assert words("🧗‍♀️🔥") == []
    # Chinese has no spaces between words: it is indexed as pairs of characters.
    assert words("膝盖受伤") == ["膝盖", "盖受", "受伤"]


def test_a_query_is_hashed_into_at_most_its_distinct_words() -> None:
    assert len(query_words(1, " ".join(f"word{n}" for n in range(300)))) == 48
    assert list(query_words(1, "knee knee knees").values()) == ["knee"]
    assert hashed_words(1, "") == ""


BAD_QUERIES = [
    "the of and to a",
    "🧗‍♀️🔥💪",
    "膝盖受伤了吗",
    "هل يمكنني الركض",
    "hangs " * 50,
    "100% of my_training",
    "%",
    "_",
    "'; DROP TABLE memory_memory; --",
    "\"quoted\" 'single'",
    "hangs & injury | !pulley",
    "hang:* & !injury",
    "(hangs) <-> injury",
    "\\x00 \\ \\\\",
]


@pytest.mark.parametrize("query", BAD_QUERIES)
def test_any_query_finds_only_the_persons_own_memories_or_gets_a_clear_error(
    user: User, other_user: User, model_server: ModelServer, query: str
) -> None:
    memories_of(user, MINE)
    memories_of(other_user, THEIRS)

    result = search(user, query)

    if result["status"] == "error":
        assert "too long" in result["error"]
        return
    keys = [m["key"] for m in result["memories"]]
    assert result["status"] == "found" and len(keys) <= 8
    assert set(keys) <= {key for key, _, _ in MINE}


def test_a_query_of_300_characters_is_searched_and_one_longer_refused_clearly(
    user: User, model_server: ModelServer
) -> None:
    memories_of(user, MINE)

    assert search(user, ("hangs pulley " * 30)[:300])["memories"][0]["key"] == "finger-injury"
    refused = search(user, "hangs " * 60)
    assert refused["status"] == "error" and "too long" in refused["error"]


@hypothesis_settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(min_size=1, max_size=300), limit=st.one_of(st.none(), st.integers(-5, 1000)))
def test_whatever_the_model_asks_a_search_returns_the_persons_own_memories_or_a_clear_error(
    user: User, other_user: User, model_server: ModelServer, query: str, limit: int | None
) -> None:
    if not Memory.objects.filter(user=user).exists():
        memories_of(user, MINE)
        memories_of(other_user, THEIRS)

    result = search(user, query, limit)

    assert result["status"] in {"found", "error"}
    if result["status"] == "found":
        assert {m["key"] for m in result["memories"]} <= {key for key, _, _ in MINE}
        assert len(result["memories"]) <= 8
    else:
        assert result["error"]
