"""The app's own split of a paste and the offline coach's answer find the same facts.

The offline coach stands in for the model the app asks to split a paste, and once kept a
copy of the app's splitter that drifted (bullets it did not know, remarks it took for
facts, headings it read differently). Both now split with `paste_splitter`; these pin
what both need, on the pastes the app's and the offline coach's tests use and on every
case the copies read differently."""

from __future__ import annotations

import json
from datetime import date

import pytest

from accounts.models import User
from memory.imports.review import NO_FACTS, import_split
from memory.imports.splitting import IMPORT_CATEGORIES, ImportRefused, split_lines
from memory.models import Tier
from memory.policy import PROTECTED_CATEGORIES
from offline_coach import ModelServer
from offline_coach.facts import pasted_facts
from paste_splitter import CATEGORIES, TIERS
from tests.memory.test_imports import CHATGPT_ANSWER, CHATGPT_FACTS

LONG_FACT = "You train for ultramarathons. " + "You log every run in a notebook with the weather and how it felt. " * 3

# Each paste, and the facts (summary, details) both must find in it.
PASTES = [
    pytest.param(
        CHATGPT_ANSWER,
        [(fact, "You've never raced further than 10k" if n == 5 else "") for n, fact in enumerate(CHATGPT_FACTS)],
        id="ChatGPT's answer",
    ),
    pytest.param(
        "**Goals**\n- Sub-two-hour half marathon\n- Read more\n\nWork:\n- Nurse at St James's",
        [("Sub-two-hour half marathon", ""), ("Goals: Read more", ""), ("Nurse at St James's", "")],
        id="headings, a bare item named by its heading",
    ),
    pytest.param(
        "- Health:\n  - bad left knee\n  - allergic to peanuts\n- Likes tea",
        [("bad left knee", ""), ("allergic to peanuts", ""), ("Likes tea", "")],
        id="a heading as a bullet, with three-word items",
    ),
    pytest.param(
        "1. [2025-03-01] - Works at a hospital\n2) Has a dog called Rex, who\n   needs walking twice a day\nDrinks tea",
        [("Works at a hospital", ""), ("Has a dog called Rex, who needs walking twice a day", ""), ("Drinks tea", "")],
        id="numbered, dated and wrapped lines",
    ),
    pytest.param(
        "You are a nurse in Leeds. You have a bad left knee from skiing. You are allergic to peanuts! "
        "Is there anything else you'd like me to remember?",
        [
            ("You are a nurse in Leeds.", ""),
            ("You have a bad left knee from skiing.", ""),
            ("You are allergic to peanuts!", ""),
        ],
        id="prose",
    ),
    pytest.param(
        f"- {LONG_FACT}",
        [("You train for ultramarathons.", " ".join(LONG_FACT.split()))],
        id="a fact too long for a summary",
    ),
    pytest.param(
        "I don't have any memories saved about you yet. Would you like to tell me about yourself?",
        [],
        id="nothing saved",
    ),
    pytest.param(
        "\u2023 Allergic to peanuts\n\u25aa Works night shifts\n\u2219 Drinks tea\n\u2043 Has a dog",
        [("Allergic to peanuts", ""), ("Works night shifts", ""), ("Drinks tea", ""), ("Has a dog", "")],
        id="bullets drawn as triangles, squares and dots",
    ),
    pytest.param(
        "I didn't save anything else about you.\n- Likes tea\n"
        "Do you want me to add anything else.\nIs there anything else I can help with.",
        [("Likes tea", "")],
        id="what the assistant did not save, and its offers",
    ),
    pytest.param(
        "- *Vegetarian* since 2019\n- Prefers *short* answers",
        [("Vegetarian since 2019", ""), ("Prefers short answers", "")],
        id="single-asterisk emphasis",
    ),
    pytest.param(
        "Allergies:\n- tree nuts, shellfish\n- cats and dogs\n- peanuts",
        [("tree nuts, shellfish", ""), ("cats and dogs", ""), ("Allergies: peanuts", "")],
        id="only one- and two-word items are named by their heading",
    ),
    pytest.param(
        "## Safety\n- Never runs alone at night\n## Constraints\n- No gym on weekdays\n"
        "## Upcoming\n- Wedding in June\n- Job interview",
        [
            ("Never runs alone at night", ""),
            ("No gym on weekdays", ""),
            ("Wedding in June", ""),
            ("Upcoming: Job interview", ""),
        ],
        id="headings of safety, constraints and things to come",
    ),
    pytest.param(
        # Under a heading that says otherwise: a safety word wins over it.
        "## Hobbies\n- Coeliac, avoids gluten\n- Carries an EpiPen\n- Lives with ADHD",
        [("Coeliac, avoids gluten", ""), ("Carries an EpiPen", ""), ("Lives with ADHD", "")],
        id="safety words the offline coach did not know",
    ),
]


def offline_coach_facts(text: str) -> list[dict[str, str]]:
    """What the offline coach answers the app's request to split `text`."""
    return json.loads(pasted_facts([{"role": "user", "content": text}], today=date(2026, 1, 5)))["facts"]


@pytest.mark.parametrize(("pasted", "expected"), PASTES)
def test_the_apps_own_split_finds_the_facts(pasted: str, expected: list[tuple[str, str]]) -> None:
    assert [(p.summary, p.details) for p in split_lines(pasted).proposals] == expected


@pytest.mark.parametrize(("pasted", "expected"), PASTES)
def test_the_offline_coach_finds_the_same_facts(pasted: str, expected: list[tuple[str, str]]) -> None:
    assert [(f["summary"], f["details"]) for f in offline_coach_facts(pasted)] == expected


@pytest.mark.parametrize(("pasted", "expected"), PASTES)
def test_a_fact_the_app_files_as_protected_the_offline_coach_files_there_too(
    pasted: str, expected: list[tuple[str, str]]
) -> None:
    app = [p.category for p in split_lines(pasted).proposals]
    offline = [f["category"] for f in offline_coach_facts(pasted)]

    # The offline coach may know more (a recogniser of its own), never less.
    assert [o for a, o in zip(app, offline, strict=True) if a in PROTECTED_CATEGORIES] == [
        a for a in app if a in PROTECTED_CATEGORIES
    ]


@pytest.mark.django_db
@pytest.mark.parametrize(("pasted", "expected"), PASTES)
def test_the_app_takes_the_offline_coachs_answer_as_it_is(
    user: User, model_server: ModelServer, pasted: str, expected: list[tuple[str, str]]
) -> None:
    if not expected:
        with pytest.raises(ImportRefused, match=NO_FACTS[:40]):
            import_split(user=user, text=pasted)
        return

    split = import_split(user=user, text=pasted)

    # Every fact of its answer passed the app's checks: none was split again here.
    assert split.by_model
    assert [(p.summary, p.details) for p in split.proposals] == expected


def test_the_splitter_names_only_categories_and_tiers_an_import_may_have() -> None:
    assert CATEGORIES.issubset(IMPORT_CATEGORIES)
    assert TIERS.issubset(Tier.values)
