"""The LoCoMo benchmark on a conversation of our own in LoCoMo's format: the loader reads
the format (its misspelt evidence too), the questions about the person are chosen by
whose turns answer them, and a tiny conversation played into the app counts its hits
where the facts really went."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from accounts.models import User
from bench.long_conversations.dataset import (
    ANSWERABLE,
    DatasetError,
    Question,
    load_conversation,
    load_conversations,
    questions_about,
    wrong_speaker_traps,
)
from bench.long_conversations.ingest import exchanges_of, ingest
from bench.long_conversations.look_back import OTHER, PERSON, FoundExchange, LookBack, look_back
from bench.long_conversations.questions import Asked, Probe, ask, traps_passed_off
from bench.long_conversations.table import Run, misses
from coach.models import ChatSession, Message
from offline_coach import ModelServer

# Two people, three sessions: Ada (A) trains for a marathon and keeps bees; Ben (B) has
# the allotment. Every fact below is made up for this test.
TINY: dict[str, Any] = {
    "speaker_a": "Ada",
    "speaker_b": "Ben",
    "session_1_date_time": "9:15 am on 3 March, 2023",
    "session_1": [
        {"speaker": "Ben", "dia_id": "D1:1", "text": "Morning Ada, how was the weekend?"},
        {"speaker": "Ada", "dia_id": "D1:2", "text": "I signed up for the Lisbon marathon in October."},
        {"speaker": "Ben", "dia_id": "D1:3", "text": "Brilliant. My allotment flooded again, the leeks drowned."},
        {
            "speaker": "Ada",
            "dia_id": "D1:4",
            "text": "Oh no. Look at my new hive!",
            "img_url": ["https://example.com/hive.jpg"],
            "blip_caption": "a photo of a wooden beehive in a garden",
        },
    ],
    "session_1_observation": {
        "Ada": [
            ["Ada signed up for the Lisbon marathon in October.", "D1:2"],
            ["Ada keeps bees in a wooden hive in her garden.", ["D1:4"]],
        ],
        "Ben": [["Ben's allotment flooded and his leeks drowned.", "D1:3"]],
    },
    "session_1_summary": "Ada signed up for a marathon; Ben's allotment flooded.",
    "session_2_date_time": "6:40 pm on 20 March, 2023",
    "session_2": [
        {"speaker": "Ada", "dia_id": "D2:1", "text": "My knee aches after long runs lately."},
        {"speaker": "Ben", "dia_id": "D2:2", "text": "Rest it. I am planting garlic this week."},
    ],
    "session_2_observation": {"Ada": [["Ada's knee aches after long runs.", "D2:1"]]},
    "session_2_summary": "Ada's knee aches; Ben plants garlic.",
    # A date with no turns: a session that never happened.
    "session_3_date_time": "1:00 pm on 1 April, 2023",
    "session_3": [],
    "qa": [
        {"question": "Which marathon is Ada running?", "answer": "Lisbon", "evidence": ["D1:2"], "category": 4},
        {"question": "What does Ada keep in her garden?", "answer": "bees", "evidence": ["D:1:4"], "category": 1},
        {"question": "When did Ada's knee start aching?", "answer": "March", "evidence": ["D2:1; D1:2"], "category": 2},
        {"question": "What drowned on Ben's allotment?", "answer": "leeks", "evidence": ["D1:3"], "category": 4},
        {"question": "What is Ada planting?", "adversarial_answer": "garlic", "evidence": ["D2:2"], "category": 5},
        {"question": "How did Ada sign up?", "answer": "online", "evidence": ["D9:9"], "category": 4},
    ],
}


def _written(folder: Path, name: str = "7", data: dict[str, Any] | None = None) -> Path:
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data or TINY))
    return path


def test_the_loader_reads_sessions_turns_photos_and_facts_and_skips_sessions_without_turns(tmp_path: Path) -> None:
    conversation = load_conversation(_written(tmp_path))

    assert (conversation.name, conversation.speaker_a, conversation.speaker_b) == ("7", "Ada", "Ben")
    assert [s.number for s in conversation.sessions] == [1, 2]
    assert conversation.sessions[0].at.isoformat() == "2023-03-03T09:15:00+00:00"
    photo = conversation.turns()["D1:4"]
    assert photo.text == "Oh no. Look at my new hive! [shares a photo: a photo of a wooden beehive in a garden]"
    assert [o.dia_ids for o in conversation.observations_of("Ada")] == [("D1:2",), ("D1:4",), ("D2:1",)]


def test_misspelt_evidence_is_read_and_evidence_naming_no_turn_is_dropped(tmp_path: Path) -> None:
    questions = load_conversation(_written(tmp_path)).questions

    assert [q.evidence for q in questions] == [("D1:2",), ("D1:4",), ("D2:1", "D1:2"), ("D1:3",), ("D2:2",), ()]
    assert questions[4].answer == "garlic"


def test_a_folder_without_the_conversations_asked_for_is_refused(tmp_path: Path) -> None:
    _written(tmp_path, "7")

    assert [c.name for c in load_conversations(tmp_path)] == ["7"]
    with pytest.raises(DatasetError, match=r"8\.json"):
        load_conversations(tmp_path, ["7", "8"])


def test_questions_about_the_person_are_those_their_own_turns_answer(tmp_path: Path) -> None:
    conversation = load_conversation(_written(tmp_path))

    about_ada = questions_about(conversation, "Ada", ANSWERABLE)
    traps = wrong_speaker_traps(conversation)

    # Ben's leeks are his; the adversarial one is category 5; the last has no evidence left.
    assert [q.text for q in about_ada] == [
        "Which marathon is Ada running?",
        "What does Ada keep in her garden?",
        "When did Ada's knee start aching?",
    ]
    assert [q.text for q in traps] == ["What is Ada planting?"]


def test_a_session_becomes_the_persons_messages_each_with_the_next_turn_as_its_reply(tmp_path: Path) -> None:
    session = load_conversation(_written(tmp_path)).sessions[0]

    openings, pairs = exchanges_of(session.turns, "Ada")

    assert [t.dia_id for t in openings] == ["D1:1"]
    assert [(said.dia_id, reply.dia_id if reply else None) for said, reply in pairs] == [
        ("D1:2", "D1:3"),
        ("D1:4", None),
    ]


def _probe(model_server: ModelServer, looking: LookBack) -> Probe:
    return Probe(look_back=looking, embedding_requests=lambda: len(model_server.embedding_requests()))


@pytest.mark.django_db
def test_a_tiny_conversation_is_stored_through_the_app_and_its_hits_are_counted_where_the_facts_went(
    tmp_path: Path, model_server: ModelServer, settings
) -> None:
    # A ceiling of two notes: the first fact (the marathon) is evicted by the third.
    settings.MEMORY_MAX_STORED = 2
    conversation = load_conversation(_written(tmp_path))
    looking = look_back()
    done = ingest(conversation, index_exchanges=looking.index)

    messages = Message.objects.filter(session__user=done.user)
    assert [m.content for m in messages.filter(role="user")] == [
        "I signed up for the Lisbon marathon in October.",
        "Oh no. Look at my new hive! [shares a photo: a photo of a wooden beehive in a garden]",
        "My knee aches after long runs lately.",
    ]
    assert messages.filter(role="assistant").count() == 2
    assert done.unstored_openings == ["D1:1"]
    sessions = ChatSession.objects.filter(user=done.user).order_by("created_at")
    assert [s.created_at.date().isoformat() for s in sessions] == ["2023-03-03", "2023-03-20"]
    assert all(s.summary for s in sessions)
    assert done.saves["saved"] == 3

    asked = ask(conversation, done, questions_about(conversation, "Ada", ANSWERABLE), _probe(model_server, looking))

    marathon, bees, knee = asked
    # The marathon's note was evicted: not in the prompt, not found; the store that keeps
    # everything still finds it.
    assert (marathon.in_prompt, marathon.in_memories, marathon.top_all, marathon.noted) == (False, False, True, True)
    assert (bees.in_prompt, bees.in_memories, bees.top_all) == (True, True, True)
    assert knee.in_prompt and knee.top_all
    assert all(a.embeddings["prompt"] == 0 and a.embeddings["search_memories"] == 1 for a in asked)
    assert all(a.memory_tokens > 0 and a.prompt_tokens > a.memory_tokens for a in asked)
    # The questions' own conversations are the benchmark's probes: none is left behind.
    assert ChatSession.objects.filter(user=done.user).count() == 2
    # Three exchanges and two summaries: a look-back's 5 hold the exchanges and the nearer
    # summary (one at most), each look-back a request.
    assert all(a.in_conversations and a.embeddings["search_conversations"] == 1 for a in asked)
    assert all(a.exchanges_alone and a.summaries_found == 1 for a in asked)
    # Ben's garlic is found in his reply, and said to be the coach's, not the person's.
    assert traps_passed_off(conversation, done, wrong_speaker_traps(conversation), looking) == (1, 1, 0)


@pytest.mark.django_db
def test_a_look_back_counts_only_the_exchanges_holding_an_evidence_turn(tmp_path: Path, model_server) -> None:
    conversation = load_conversation(_written(tmp_path))
    done = ingest(conversation, index_exchanges=None)
    knee = next(pk for pk, turns in done.exchange_turns.items() if turns == ("D2:1", "D2:2"))
    bees = next(pk for pk, turns in done.exchange_turns.items() if turns == ("D1:4",))

    def found(user: User, query: str, limit: int, current_session_id: int | None) -> list[FoundExchange]:
        # Whatever is asked: the knee's exchange, one conversation's summary, and the hive
        # with its line passed off as Ben's.
        return [
            FoundExchange(1, knee, ((PERSON, "My knee aches after long runs lately."), (OTHER, "Rest it."))),
            FoundExchange(1, None, ((OTHER, "Ada signed up for a marathon; Ben's allotment flooded."),)),
            FoundExchange(1, bees, ((OTHER, "Oh no. Look at my new hive!"),)),
        ]

    stub = LookBack(index=None, search=found)
    asked = ask(conversation, done, questions_about(conversation, "Ada", ANSWERABLE), _probe(model_server, stub))

    # The marathon's turn is only in a summary: not an evidence turn found.
    assert [a.in_conversations for a in asked] == [False, True, True]
    assert traps_passed_off(conversation, done, wrong_speaker_traps(conversation), stub) == (1, 0, 0)


@pytest.mark.django_db
def test_a_look_back_that_passes_the_other_speakers_words_off_as_the_persons_is_counted(
    tmp_path: Path, model_server
) -> None:
    conversation = load_conversation(_written(tmp_path))
    done = ingest(conversation, index_exchanges=None)

    def found(user: User, query: str, limit: int, current_session_id: int | None) -> list[FoundExchange]:
        return [FoundExchange(1, None, ((PERSON, "Rest it. I am planting garlic this week."),))]

    stub = LookBack(index=None, search=found)

    assert traps_passed_off(conversation, done, wrong_speaker_traps(conversation), stub) == (1, 1, 1)


def test_the_misses_printed_are_questions_nothing_reached_one_per_category(tmp_path: Path) -> None:
    conversation = load_conversation(_written(tmp_path))
    marathon, bees, _ = questions_about(conversation, "Ada", ANSWERABLE)

    def asked(question: Question, *, reached: bool) -> Asked:
        return Asked(
            question=question,
            in_prompt=reached,
            in_memories=False,
            in_conversations=False,
            top_all=False,
            noted=True,
            exchanges_alone=None,
            summaries_found=0,
            prompt_tokens=0,
            memory_tokens=0,
        )

    # Only the conversation and the answers are read: the rest of the run is left empty.
    run = Run(
        conversation=conversation,
        done=None,  # type: ignore[arg-type]
        asked=[asked(marathon, reached=False), asked(bees, reached=True)],
        ingest_embeddings=0,
        look_back_embeddings=0,
        traps=(0, 0, 0),
        observations_tokens=0,
        whole_tokens=0,
        kept=0,
    )

    assert misses([run]) == [
        "- 7, category 4: 'Which marathon is Ada running?' (answer 'Lisbon'); noted as an observation",
        "  evidence: Ada (D1:2): I signed up for the Lisbon marathon in October.",
    ]
