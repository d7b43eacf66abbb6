"""The paste splitter, read as its rules. No database, no app: the package is pure.

Each of these is a rule the app's own split and the offline coach's once read differently
(the offline coach kept a copy of the splitter, and it drifted); test_both_sides.py holds
the two to the same facts."""

from __future__ import annotations

import pytest

from paste_splitter import split_paste

SUMMARY_MAX_CHARS = 150


def facts(text: str, *, limit: int = SUMMARY_MAX_CHARS) -> list[tuple[str, str, str, str]]:
    return [(f.summary, f.details, f.category, f.tier) for f in split_paste(text, summary_max_chars=limit).facts]


def summaries(text: str) -> list[str]:
    return [summary for summary, *_ in facts(text)]


@pytest.mark.parametrize("glyph", ["-", "*", "+", "\u2022", "\u2023", "\u2043", "\u2219", "\u25aa", "\u25cf", "\u25e6"])
def test_every_bullet_an_assistant_draws_starts_a_fact_and_leaves_it(glyph: str) -> None:
    split = split_paste(f"{glyph} Allergic to peanuts\n{glyph} Drinks tea", summary_max_chars=SUMMARY_MAX_CHARS)

    assert [f.summary for f in split.facts] == ["Allergic to peanuts", "Drinks tea"]
    assert split.list_items == 2


@pytest.mark.parametrize(
    "remark",
    [
        "I didn't save anything else about you.",
        "I did not keep anything from our other chats.",
        "Do you want me to add anything else.",
        "Is there anything else I can help with.",
        "Would you like me to forget any of these?",
        "Here's what I know about you:",
    ],
)
def test_what_the_assistant_says_of_itself_is_no_fact(remark: str) -> None:
    assert summaries(f"{remark}\n- Likes tea") == ["Likes tea"]


def test_emphasis_single_or_double_is_taken_off_the_words() -> None:
    assert summaries("- *Vegetarian* since 2019\n- Prefers **short** answers\n- Uses `vim`") == [
        "Vegetarian since 2019",
        "Prefers short answers",
        "Uses vim",
    ]


def test_only_an_item_of_one_or_two_words_is_named_by_its_heading() -> None:
    assert summaries("Allergies:\n- peanuts\n- tree nuts\n- cats and dogs\n- Allergic to bee stings") == [
        "Allergies: peanuts",
        "Allergies: tree nuts",
        "cats and dogs",
        # The item says what it is already.
        "Allergic to bee stings",
    ]


def test_a_fact_too_long_for_a_summary_is_summed_up_by_its_first_sentence() -> None:
    fact = "You train for ultramarathons. " + "You log every run in a notebook with the weather and how it felt. " * 3

    [(summary, details, _, _)] = facts(f"- {fact}")

    assert summary == "You train for ultramarathons."
    assert details == " ".join(fact.split())


def test_the_longest_summary_is_the_callers_to_say() -> None:
    [(summary, details, _, _)] = facts("- Runs on Tuesday and Thursday mornings before work", limit=20)

    assert summary == "Runs on Tuesday\u2026"
    assert details == "Runs on Tuesday and Thursday mornings before work"


@pytest.mark.parametrize(
    ("heading", "category", "tier"),
    [
        ("## Safety", "safety", "profile"),
        ("## Constraints", "constraint", "profile"),
        ("## Medical conditions", "medical", "profile"),
        ("## Injuries", "injury", "profile"),
        ("**Calendar**", "schedule", "profile"),
        ("Links:", "reference", "profile"),
        ("## Upcoming", "other", "prospective"),
        ("## Plans", "other", "prospective"),
        # A hint is a whole word: homework is not work, wildlife not life.
        ("## Homework", "other", "profile"),
        ("## Wildlife", "other", "profile"),
    ],
)
def test_a_heading_hints_at_the_category_or_tier_of_what_follows(heading: str, category: str, tier: str) -> None:
    # Words of their own that say nothing, so only the heading can.
    [(_, _, found_category, found_tier)] = facts(f"{heading}\n- Three of them now")

    assert (found_category, found_tier) == (category, tier)


@pytest.mark.parametrize("heading", ["## Health", "## Health and well-being", "**Health & fitness**", "Wellbeing:"])
def test_a_heading_as_wide_as_health_files_nothing_as_medical_without_safety_words(heading: str) -> None:
    found = facts(f"{heading}\n- Prefers metric units\n- Runs three times a week\n- You have mild asthma")

    assert [(summary, category) for summary, _, category, _ in found] == [
        ("Prefers metric units", "preference"),
        ("Runs three times a week", "schedule"),
        ("You have mild asthma", "medical"),
    ]


@pytest.mark.parametrize(
    ("fact", "category"),
    [
        ("Coeliac, avoids gluten", "allergy"),
        ("Carries an EpiPen", "allergy"),
        ("Lactose intolerant", "allergy"),
        ("Sprained an ankle in March", "injury"),
        ("Torn meniscus, left side", "injury"),
        ("Has ADHD", "medical"),
        ("Takes medication for blood pressure", "medical"),
    ],
)
def test_safety_words_file_a_fact_whatever_its_heading_says(fact: str, category: str) -> None:
    [(_, _, found, _)] = facts(f"## Hobbies\n- {fact}")

    assert found == category
