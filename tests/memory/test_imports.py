"""Importing what another assistant knows: the paste split into proposals (by the model,
else line by line), every field of the model's answer checked, and the ticked proposals
saved as the person's own within the ceiling rules."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import User
from memory.imports.review import IMPORT_MAX_FACTS, NO_FACTS, import_split
from memory.imports.saving import ImportInvalid, memories_import
from memory.imports.splitting import (
    EMPTY,
    IMPORT_MAX_CHARS,
    ImportRefused,
    Mark,
    Proposal,
    import_text_clean,
    model_chunks,
    split_lines,
)
from memory.models import Memory, MemoryEvent, MemoryProposal
from memory.policy import is_protected
from offline_coach import ModelServer
from tests.memory.factories import make_memories, make_memory

pytestmark = pytest.mark.django_db

# What ChatGPT answers the page's prompt with: a line about itself, headings, bullets (some
# with clauses of their own, one with a point under it), and an offer at the end.
CHATGPT_ANSWER = """Here's what I remember about you:

## About you
- Your name is Ada and you work as a nurse, mostly on night shifts
- You live in Leeds with your partner and two kids

## Health
- You have a bad left knee (an old skiing injury), so you avoid deep squats and jumping
- You're allergic to peanuts and cashews
- You have mild asthma, which flares up in cold weather

## Goals
- You're training for a half marathon in April, aiming to finish under two hours
  - You've never raced further than 10k
- You want to get back to reading one book a month

## Routine and preferences
- You run on Tuesday and Thursday mornings, before your shift
- You prefer short, blunt answers with a clear next step
- You drink coffee only before noon
- You're writing a short story collection, three stories finished so far
- You like to review your week on Sunday evenings

Let me know if you'd like me to update or forget anything!
"""
CHATGPT_FACTS = (
    "Your name is Ada and you work as a nurse, mostly on night shifts",
    "You live in Leeds with your partner and two kids",
    "You have a bad left knee (an old skiing injury), so you avoid deep squats and jumping",
    "You're allergic to peanuts and cashews",
    "You have mild asthma, which flares up in cold weather",
    "You're training for a half marathon in April, aiming to finish under two hours",
    "You want to get back to reading one book a month",
    "You run on Tuesday and Thursday mornings, before your shift",
    "You prefer short, blunt answers with a clear next step",
    "You drink coffee only before noon",
    "You're writing a short story collection, three stories finished so far",
    "You like to review your week on Sunday evenings",
)


def structured_answer(facts: list[dict[str, str]]) -> str:
    """What a model asked for JSON answers."""
    return json.dumps({"facts": facts})


MODEL_FACTS = [
    {"summary": "Ada, a nurse on night shifts", "details": "", "category": "background", "tier": "profile"},
    {"summary": "Lives in Leeds with partner and two kids", "details": "", "category": "background", "tier": "profile"},
    {
        "summary": "Bad left knee from skiing",
        "details": "Avoids deep squats and jumping",
        "category": "injury",
        "tier": "profile",
    },
    {"summary": "Allergic to peanuts and cashews", "details": "", "category": "allergy", "tier": "profile"},
    {"summary": "Mild asthma, worse in cold weather", "details": "", "category": "medical", "tier": "profile"},
    {
        "summary": "Half marathon in April, under two hours",
        "details": "Never raced past 10k",
        "category": "goal",
        "tier": "prospective",
    },
    {"summary": "Wants to read one book a month again", "details": "", "category": "goal", "tier": "profile"},
    {"summary": "Runs Tuesday and Thursday mornings", "details": "", "category": "schedule", "tier": "profile"},
    {"summary": "Wants short, blunt answers", "details": "", "category": "feedback", "tier": "profile"},
    {"summary": "Coffee only before noon", "details": "", "category": "habit", "tier": "profile"},
    {"summary": "Writing a short story collection", "details": "", "category": "project", "tier": "profile"},
    {"summary": "Reviews the week on Sunday evenings", "details": "", "category": "habit", "tier": "profile"},
]


def import_requests(server: ModelServer) -> list[dict]:
    return [body for body in server.chat_requests() if ModelServer.system_prompt(body).startswith("# Memory import")]


# The line splitter ---------------------------------------------------------------------


def test_a_chatgpt_style_list_is_one_proposal_per_bullet_without_its_chatter() -> None:
    split = split_lines(CHATGPT_ANSWER)

    assert [p.summary for p in split.proposals] == list(CHATGPT_FACTS)
    assert split.items == 12 and not split.from_prose
    # The point under a bullet says more about it: it is that fact's details.
    assert split.proposals[5].details == "You've never raced further than 10k"
    assert all(p.tier == "profile" for p in split.proposals)


def test_safety_words_file_a_fact_whatever_its_heading_says() -> None:
    categories = [p.category for p in split_lines(CHATGPT_ANSWER).proposals]

    assert categories[2:5] == ["injury", "allergy", "medical"]
    assert categories[5:7] == ["goal", "goal"]
    # "Routine and preferences" names two topics, so each fact's own words decide.
    assert categories[7:9] == ["schedule", "preference"]


def test_a_heading_names_the_category_of_what_its_own_words_leave_open() -> None:
    split = split_lines("**Goals**\n- Sub-two-hour half marathon\n- Read more\n\nWork:\n- Nurse at St James's")

    assert [(p.summary, p.category) for p in split.proposals] == [
        ("Sub-two-hour half marathon", "goal"),
        ("Goals: Read more", "goal"),
        ("Nurse at St James's", "background"),
    ]


def test_an_injury_and_an_allergy_under_one_heading_are_two_facts_in_two_categories() -> None:
    split = split_lines("- Health:\n  - bad left knee\n  - allergic to peanuts\n- Likes tea")

    assert [(p.summary, p.category) for p in split.proposals] == [
        ("bad left knee", "injury"),
        ("allergic to peanuts", "allergy"),
        ("Likes tea", "preference"),
    ]


def test_one_fact_per_line_numbered_or_not_with_dates_and_wrapped_lines() -> None:
    split = split_lines(
        "1. [2025-03-01] - Works at a hospital\n2) Has a dog called Rex, who\n   needs walking twice a day\nDrinks tea"
    )

    assert [p.summary for p in split.proposals] == [
        "Works at a hospital",
        "Has a dog called Rex, who needs walking twice a day",
        "Drinks tea",
    ]


def test_prose_is_proposed_one_sentence_at_a_time() -> None:
    split = split_lines(
        "You are a nurse in Leeds. You have a bad left knee from skiing. You are allergic to peanuts! "
        "Is there anything else you'd like me to remember?"
    )

    assert [(p.summary, p.category) for p in split.proposals] == [
        ("You are a nurse in Leeds.", "background"),
        ("You have a bad left knee from skiing.", "injury"),
        ("You are allergic to peanuts!", "allergy"),
    ]
    assert split.from_prose


def test_a_fact_too_long_for_a_summary_keeps_every_word_in_its_details() -> None:
    fact = "You train for ultramarathons. " + "You log every run in a notebook with the weather and how it felt. " * 3

    [proposal] = split_lines(f"- {fact}").proposals

    assert proposal.summary == "You train for ultramarathons."
    assert proposal.details == " ".join(fact.split())


# What cannot be split ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pasted", "says"),
    [
        ("", EMPTY),
        ("  \n\t ", EMPTY),
        ("x" * (IMPORT_MAX_CHARS + 1), f"That is {IMPORT_MAX_CHARS + 1:,} characters"),
    ],
)
def test_a_paste_that_cannot_be_used_says_why(pasted: str, says: str) -> None:
    with pytest.raises(ImportRefused) as refused:
        import_text_clean(pasted)

    assert str(refused.value).startswith(says)


def test_a_line_of_html_is_named_and_left_out_and_the_rest_is_proposed(user: User, model_server: ModelServer) -> None:
    pasted = CHATGPT_ANSWER.replace(
        "- You're allergic to peanuts and cashews",
        '- You\'re allergic to peanuts and cashews\n<div class="memory">You have two cats</div>\n<script>x()</script>',
    )

    split = import_split(user=user, text=pasted)

    assert [p.summary for p in split.proposals] == list(CHATGPT_FACTS)
    assert [(line.number, line.starts) for line in split.skipped] == [
        (10, '<div class="memory">You have two cats</div>'),
        (11, "<script>x()</script>"),
    ]
    assert split.skipped[0].why == "it has HTML in it (<div…), so it reads as a web page's code, not a fact"
    [request] = import_requests(model_server)
    assert "<" not in request["messages"][-1]["content"], "no markup reaches the model"


def test_a_paste_that_is_all_html_is_refused_saying_so(user: User) -> None:
    with pytest.raises(ImportRefused) as refused:
        import_split(user=user, text="<ul>\n<li>Allergic to peanuts</li>\n</ul>")

    assert str(refused.value).startswith("Every line of this has HTML in it")


def test_a_line_longer_than_a_memory_holds_is_named_and_left_out(user: User, settings) -> None:
    long_line = "- " + "You log every run. " * 150

    split = import_split(user=user, text=f"- Likes tea\n{long_line}\n- Runs on Sundays")

    assert [p.summary for p in split.proposals] == ["Likes tea", "Runs on Sundays"]
    [skipped] = split.skipped
    assert skipped.number == 2
    assert skipped.why == (
        f"it is {len(long_line.strip()):,} characters long, more than one memory holds "
        f"({settings.MEMORY_CONTENT_MAX_CHARS:,})"
    )


def test_a_paste_of_exactly_the_limit_is_taken() -> None:
    assert len(import_text_clean("x" * IMPORT_MAX_CHARS)) == IMPORT_MAX_CHARS


def test_an_assistant_with_nothing_saved_gives_no_facts(user: User, model_server: ModelServer) -> None:
    with pytest.raises(ImportRefused) as refused:
        import_split(
            user=user,
            text="I don't have any memories saved about you yet. Would you like to tell me about yourself?",
        )

    assert str(refused.value) == NO_FACTS


def test_past_the_most_facts_an_import_takes_the_first_are_proposed_and_where_the_rest_starts_is_said(
    user: User, model_server: ModelServer
) -> None:
    pasted = "## Facts\n" + "\n".join(f"- Fact number {n}" for n in range(IMPORT_MAX_FACTS + 30))

    split = import_split(user=user, text=pasted)

    assert [p.summary for p in split.proposals] == [f"Fact number {n}" for n in range(IMPORT_MAX_FACTS)]
    assert split.unread_from_line == IMPORT_MAX_FACTS + 2
    sent = "\n".join(request["messages"][-1]["content"] for request in import_requests(model_server))
    assert f"Fact number {IMPORT_MAX_FACTS - 1}" in sent and f"Fact number {IMPORT_MAX_FACTS}\n" not in sent


# The model's split ---------------------------------------------------------------------


def test_the_offline_coach_splits_the_paste_as_the_model_would(user: User, model_server: ModelServer) -> None:
    split = import_split(user=user, text=CHATGPT_ANSWER)

    assert split.by_model
    assert [p.summary for p in split.proposals] == list(CHATGPT_FACTS)
    assert [p.category for p in split.proposals][2:5] == ["injury", "allergy", "medical"]
    [request] = import_requests(model_server)
    assert request["messages"][-1] == {"role": "user", "content": CHATGPT_ANSWER.strip()}
    assert "episode" not in ModelServer.system_prompt(request).split("Categories:")[1]


def test_a_model_answering_with_structured_facts_gives_its_facts(user: User, model_server: ModelServer) -> None:
    model_server.queue_text(structured_answer(MODEL_FACTS))

    split = import_split(user=user, text=CHATGPT_ANSWER)

    assert split.by_model
    assert split.proposals == tuple(
        Proposal(summary=f["summary"], details=f["details"], category=f["category"], tier=f["tier"])
        for f in MODEL_FACTS
    )


def test_a_model_answer_in_a_code_fence_after_a_sentence_is_read(user: User, model_server: ModelServer) -> None:
    model_server.queue_text("Here you go:\n```json\n" + structured_answer(MODEL_FACTS) + "\n```")

    split = import_split(user=user, text=CHATGPT_ANSWER)

    assert split.by_model and split.proposals[2].summary == "Bad left knee from skiing"


def test_a_summary_the_model_made_too_long_keeps_its_words_in_the_details(
    user: User, model_server: ModelServer
) -> None:
    long = "Runs on Tuesday and Thursday mornings before a night shift, " * 4
    model_server.queue_text(structured_answer([*MODEL_FACTS[:11], {"summary": long, "category": "schedule"}]))

    split = import_split(user=user, text=CHATGPT_ANSWER)

    last = split.proposals[-1]
    assert len(last.summary) <= 150 and last.summary.endswith("\u2026")
    assert last.details == " ".join(long.split()) and last.tier == "profile"


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param("Sure! Here is everything I know about you.", id="no JSON"),
        pytest.param(structured_answer(MODEL_FACTS)[:-40], id="cut off"),
        pytest.param('{"facts": "bad left knee"}', id="not a list"),
        pytest.param('{"facts": []}', id="no facts"),
        pytest.param(structured_answer(MODEL_FACTS[:3]), id="three facts for twelve items"),
    ],
)
def test_an_unusable_model_answer_falls_back_to_one_proposal_per_line(
    user: User, model_server: ModelServer, answer: str
) -> None:
    model_server.queue_text(answer)

    split = import_split(user=user, text=CHATGPT_ANSWER)

    assert not split.by_model
    assert split.proposals == split_lines(CHATGPT_ANSWER).proposals


@pytest.mark.parametrize(
    "fact",
    [
        pytest.param("Bad left knee", id="not an object"),
        pytest.param({"summary": 3}, id="a summary that is not text"),
        pytest.param({"summary": "   "}, id="an empty summary"),
        pytest.param({"summary": "Bad knee", "details": ["squats"]}, id="details that are not text"),
        pytest.param({"summary": "Bad knee", "details": "x" * 2001}, id="details too long"),
        pytest.param({"summary": "Bad knee", "category": "knees"}, id="a category no memory has"),
        pytest.param({"summary": "Bad knee", "category": "episode"}, id="a weekly episode"),
        pytest.param({"summary": "Bad knee", "tier": "forever"}, id="a tier no memory has"),
        pytest.param({"summary": "<b>Bad knee</b>"}, id="markup"),
    ],
)
def test_one_fact_no_memory_may_be_makes_the_model_answer_unusable(
    user: User, model_server: ModelServer, fact: object
) -> None:
    model_server.queue_text(json.dumps({"facts": [*MODEL_FACTS[:11], fact]}))

    split = import_split(user=user, text=CHATGPT_ANSWER)

    assert not split.by_model
    assert split.proposals == split_lines(CHATGPT_ANSWER).proposals


def test_a_model_error_falls_back_to_one_proposal_per_line(user: User, model_server: ModelServer) -> None:
    model_server.queue_error(500)

    split = import_split(user=user, text=CHATGPT_ANSWER)

    assert not split.by_model and len(split.proposals) == 12


def test_a_long_paste_goes_to_the_model_in_parts_each_under_its_heading() -> None:
    pasted = "## Health\n" + "\n".join(f"- Fact {n}\n  - more on {n}" for n in range(30))

    parts = list(model_chunks(pasted, size=20))

    assert len(parts) == 3
    assert all(part.startswith("## Health\n- Fact") for part in parts)
    # A part never ends between a fact and the point under it.
    assert all(part.endswith(tuple(f"  - more on {n}" for n in range(30))) for part in parts)
    assert sum(part.count("\n- Fact") for part in parts) == 30


def test_a_part_the_model_fails_is_split_line_by_line_and_the_model_is_not_asked_again(
    user: User, model_server: ModelServer, monkeypatch
) -> None:
    # Three parts: the first five facts, the next five, the last two.
    monkeypatch.setattr("memory.imports.splitting.MODEL_CHUNK_LINES", 8)
    model_server.queue_text(structured_answer(MODEL_FACTS[:5]))
    model_server.queue_error(503)

    split = import_split(user=user, text=CHATGPT_ANSWER)

    assert not split.by_model
    assert [p.summary for p in split.proposals][:5] == [f["summary"] for f in MODEL_FACTS[:5]]
    assert [p.summary for p in split.proposals][5:] == list(CHATGPT_FACTS[5:])
    assert len(import_requests(model_server)) == 2


def test_a_fact_the_person_already_has_is_marked_known_beside_the_memory_they_keep(
    user: User, model_server: ModelServer
) -> None:
    kept = make_memory(
        user, "allergy-1", source="user", category="allergy", summary="You're allergic to peanuts and cashews."
    )

    split = import_split(user=user, text=CHATGPT_ANSWER)

    assert [p.mark for p in split.proposals].count(Mark.KNOWN) == 1
    assert (split.proposals[3].mark, split.proposals[3].kept, split.proposals[3].kept_version) == (
        Mark.KNOWN,
        kept.pk,
        kept.version,
    )


# Saving ----------------------------------------------------------------------------------


def test_saved_imports_are_the_persons_own_protected_and_neutrally_named(user: User, model_server: ModelServer) -> None:
    proposals = split_lines(CHATGPT_ANSWER).proposals[:10]

    outcome = memories_import(user=user, proposals=proposals, imported_from="chatgpt")

    saved = list(Memory.objects.filter(user=user).order_by("pk"))
    assert [m.summary for m in saved] == list(CHATGPT_FACTS[:10])
    assert {m.source for m in saved} == {"user"}
    assert all(is_protected(m.facts) for m in saved)
    assert [m.key for m in saved][2:5] == ["injury-1", "allergy-1", "medical-1"]
    assert saved[5].content == "You've never raced further than 10k"
    assert [m.pk for m in outcome.saved] == [m.pk for m in saved]
    events = MemoryEvent.objects.filter(user=user)
    assert [(e.action, e.actor, e.reason) for e in events] == [("created", "user", "imported from ChatGPT")] * 10
    assert {m.imported_from for m in saved} == {"chatgpt"}
    # One embedding call for all of them.
    [request] = model_server.embedding_requests()
    assert len(request["input"]) == 10
    assert not MemoryProposal.objects.exists()


def test_imported_keys_follow_the_ones_the_person_has(user: User, model_server: ModelServer) -> None:
    make_memory(user, "allergy-1", source="user", category="allergy", summary="Allergic to bee stings")
    proposals = [Proposal("Allergic to peanuts", category="allergy"), Proposal("Allergic to kiwi", category="allergy")]

    memories_import(user=user, proposals=proposals)

    keys = sorted(Memory.objects.filter(user=user).values_list("key", flat=True))
    assert keys == ["allergy-1", "allergy-2", "allergy-3"]


def test_one_proposal_that_cannot_be_saved_saves_nothing_and_says_which(user: User, model_server: ModelServer) -> None:
    proposals = [Proposal("Likes tea"), Proposal("x" * 151), Proposal("", category="goal")]

    with pytest.raises(ImportInvalid) as invalid:
        memories_import(user=user, proposals=proposals)

    assert invalid.value.errors == {
        1: {"summary": "is 151 characters; at most 150"},
        2: {"summary": "must not be empty"},
    }
    assert not Memory.objects.exists() and not MemoryEvent.objects.exists()
    assert model_server.embedding_requests() == []


def test_an_import_past_the_ceiling_forgets_the_coachs_oldest_notes_and_keeps_every_import(
    user: User, model_server: ModelServer, settings
) -> None:
    settings.MEMORY_MAX_STORED = 12
    notes = make_memories(user, 6, start=timezone.now() - timedelta(days=3))

    outcome = memories_import(user=user, proposals=split_lines(CHATGPT_ANSWER).proposals[:10])

    assert [e.ref for e in outcome.evicted] == [n.pk for n in notes[:4]]
    assert Memory.objects.filter(user=user, source="user").count() == 10
    assert set(Memory.objects.filter(user=user, source="coach").values_list("pk", flat=True)) == {
        n.pk for n in notes[4:]
    }
    assert (outcome.room.stored, outcome.room.kept, outcome.room.ceiling) == (12, 10, 12)


def test_the_persons_own_imports_may_pass_the_ceiling_and_say_so(
    user: User, model_server: ModelServer, settings
) -> None:
    settings.MEMORY_MAX_STORED = 8

    outcome = memories_import(user=user, proposals=split_lines(CHATGPT_ANSWER).proposals)

    assert len(outcome.saved) == 12 and not outcome.evicted
    assert outcome.room.kept == 12 > outcome.room.ceiling


SHELLFISH_LIST = """Here's what I remember about you:

- You're allergic to shellfish
- Allergic to shellfish
- You have a shellfish allergy, so no prawns or mussels
- You run on Saturday mornings with your club
"""


def test_an_import_that_says_one_allergy_three_ways_beside_the_stored_one_offers_none_of_them_again(
    user: User, model_server: ModelServer, settings
) -> None:
    settings.EMBEDDING_MODEL = "bag-of-words"
    settings.MEMORY_DEDUP_THRESHOLD = settings.CALIBRATED_DEDUP_THRESHOLDS["bag-of-words"]
    settings.MEMORY_DEDUP_FAR_THRESHOLD = settings.CALIBRATED_DEDUP_FAR_THRESHOLDS["bag-of-words"]
    make_memory(user, "allergy-1", source="user", category="allergy", summary="Allergic to shellfish")

    split = import_split(user=user, text=SHELLFISH_LIST)

    assert [p.mark for p in split.proposals] == [Mark.KNOWN] * 3 + [Mark.NEW]


def test_a_list_that_repeats_itself_offers_the_repeats_unticked_and_said_so(
    user: User, model_server: ModelServer, settings
) -> None:
    settings.MEMORY_DEDUP_THRESHOLD = settings.CALIBRATED_DEDUP_THRESHOLDS["bag-of-words"]
    settings.MEMORY_DEDUP_FAR_THRESHOLD = settings.CALIBRATED_DEDUP_FAR_THRESHOLDS["bag-of-words"]

    split = import_split(user=user, text=SHELLFISH_LIST)

    assert [(p.mark, p.earlier) for p in split.proposals] == [
        (Mark.NEW, None),
        (Mark.REPEATS, 0),
        (Mark.REPEATS, 0),
        (Mark.NEW, None),
    ]


def test_without_embeddings_an_import_still_marks_what_it_says_word_for_word(
    user: User, model_server: ModelServer
) -> None:
    make_memory(user, "allergy-1", source="user", category="allergy", summary="Allergic to shellfish")
    # The split is the model's; the embedding request after it fails.
    model_server.queue_embedding_error(500)

    split = import_split(user=user, text=SHELLFISH_LIST)

    assert [p.mark for p in split.proposals] == [Mark.NEW, Mark.KNOWN, Mark.NEW, Mark.NEW]
