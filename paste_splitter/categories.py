"""What a pasted fact is about: its category and tier, from the heading it falls under and
from its own words. Safety first, and only on safety words: a fact that names an allergy,
an injury or a medical condition is filed so whatever its heading says, and a fact is
filed under a safety category only when its own words, or its heading's, name one
("Allergies", "Injuries", "Medical conditions"): a heading as wide as "Health" or "Health
and fitness" files nothing as medical ("Prefers metric units" under it is a preference).

The names are the app's memory categories and tiers (memory.models) as plain text: this
package imports nothing of the app, and a test holds the two lists together.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PROFILE = "profile"
PROSPECTIVE = "prospective"
OTHER = "other"


@dataclass(frozen=True)
class Heading:
    """What a heading says of the facts under it."""

    category: str | None = None
    tier: str | None = None
    # The heading's own words, to name what a bare item is ("Allergies: peanuts").
    label: str = ""


# What a heading's words say of the facts under it; every match counts (see heading_of).
HEADING_HINTS: tuple[tuple[re.Pattern[str], Heading], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), hint)
    for pattern, hint in (
        (r"allerg", Heading(category="allergy")),
        (r"injur", Heading(category="injury")),
        # Never "health" or "well-being" alone: such a heading holds units, sleep and steps too.
        (r"medical|medication|\bconditions?\b|diagnos", Heading(category="medical")),
        (r"safety", Heading(category="safety")),
        (r"constraint|limitation|restriction", Heading(category="constraint")),
        (r"upcoming|coming up|\bplans?\b|\bevents?\b|reminder|deadline|future", Heading(tier=PROSPECTIVE)),
        (r"goal|\baims?\b|aspiration|ambition", Heading(category="goal")),
        (r"schedule|availability|calendar|timetable", Heading(category="schedule")),
        (r"habit|routine", Heading(category="habit")),
        (r"instruction|feedback|coaching|respond|response|communicat|\btone\b", Heading(category="feedback")),
        (r"preference|\blikes\b|dislike|interest|hobb|favou?rite|\bstyle\b", Heading(category="preference")),
        (r"project", Heading(category="project")),
        (r"\bwork|career|\bjob|background|about|personal|identity|\bbio|profile|family|\blife\b|who",
         Heading(category="background")),
        (r"reference|\blinks?\b|resource|\btools?\b", Heading(category="reference")),
    )
)  # fmt: skip


def heading_of(words: str) -> Heading:
    """What a heading says of its facts. One naming two topics ("Routine and preferences")
    says nothing of each fact's category: their own words do."""
    hints = [hint for pattern, hint in HEADING_HINTS if pattern.search(words)]
    categories = {hint.category for hint in hints if hint.category}
    tier = next((hint.tier for hint in hints if hint.tier), None)
    return Heading(category=categories.pop() if len(categories) == 1 else None, tier=tier, label=words)


BODY_PARTS = "knee|back|shoulder|ankle|hip|wrist|elbow|neck|foot|hamstring|calf|shin|finger|achilles|groin|thumb"
SAFETY_WORDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (category, re.compile(pattern.replace("{part}", BODY_PARTS), re.IGNORECASE))
    for category, pattern in (
        ("allergy", r"\ballerg|\banaphyla|\bepi-?pen|\bintoleran(?:t|ce)\b|\bc(?:o)?eliac"),
        (
            "injury",
            r"\binjur|\bsprain|\bstrained\b|\btorn\b|\bfractur|\bbroken\b|\bdislocat|\btendin|\bligament|\bacl\b"
            r"|\bmeniscus|\bsciatica|\bhernia|\bimpingement|\btor[en]\b|\btear\b|\bbroke\b|\bpulled (?:my|a)\b"
            r"|\b(?:bad|sore|weak|dodgy|injured|stiff|painful|tweaked) (?:left |right |lower |upper )?(?:{part})"
            r"|\b(?:{part})s? (?:replaced|replacement|hurts?|aches?|is (?:sore|injured|painful))"
            r"|\b(?:hurt|injured|strained|twisted|sprained|pulled|tweaked|broke) (?:my|your|their) "
            r"(?:(?:left|right|lower|upper) )?(?:{part})",
        ),
        (
            "medical",
            r"\basthma|\bdiabet|\bblood pressure|\bhypertension|\bmedication|\bmedicine\b|\bdiagnos|\bpregnan"
            r"|\bmigraine|\bepilep|\bheart (?:condition|disease|problem)|\banxiety|\bdepress|\badhd\b|\binsulin"
            r"|\bthyroid|\barthritis|\bchronic\b|\bsurgery|\bdisorder\b|\bsyndrome|\binhaler|\bblood thinner"
            r"|\bbeta[- ]blocker|\bstatins?\b|\bantidepressant|\bsteroid|\bwarfarin|\bmetformin|\blevothyroxine"
            r"|\bmeds\b",
        ),
        (
            # Food they will not eat, and what they must not do: kept as safely as an allergy.
            "constraint",
            r"\b(?:vegetarian|vegan|pescatarian|pescetarian|plant-based|teetotal|halal|kosher)\b"
            r"|\b(?:don't|do not|never|can't|cannot|won't) (?:eat|drink)\b"
            r"|^(?:please,?\s+)?(?:no|avoid|avoiding)\s+(?:\w+\s+){0,2}(?:\w+ing|squats|lunges|burpees|deadlifts|sprints"
            r"|hills|jumps|hangs|presses)\b|\b(?:can't|cannot|shouldn't|mustn't) do\b|\bnot allowed to\b",
        ),
    )
)
OTHER_WORDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (category, re.compile(pattern, re.IGNORECASE))
    for category, pattern in (
        (
            "goal",
            r"\bgoals?\b|\baim(?:s|ing)? (?:to|for)\b|\bwants? to\b|\bwould like to\b|\bhop(?:es|ing) to\b"
            r"|\btraining for\b|\bworking towards?\b|\bplans? to\b|\bdreams? of\b|\btrying to\b",
        ),
        (
            "background",
            r"\bname is\b|\b(?:you're|you are|i'm|i am) an? \w+"
            r"|\bworks? (?:as|at|in|for)\b|\bjob\b|\bcareer\b|\blives? in\b|\bborn\b|\byears old\b"
            r"|\bmarried\b|\bpartner\b|\bkids?\b|\bchildren\b|\bstudied\b|\bdegree\b|\bretired\b",
        ),
        (
            "schedule",
            r"\b(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b|\bweekdays?\b|\bweekends?\b|\bmornings?\b|\bevenings?\b"
            r"|\bafternoons?\b|\bevery day\b|\bdaily\b|\btimes? a week\b|\bschedule\b|\bshifts?\b"
            r"|\b\d{1,2}(?::\d{2})?\s?(?:am|pm)\b",
        ),
        ("preference", r"\bprefers?\b|\blikes?\b|\bloves?\b|\benjoys?\b|\bdislikes?\b|\bhates?\b|\bfavou?rite\b"),
        ("project", r"\bprojects?\b|\bbuilding (?:a|an)\b|\bwriting (?:a|an)\b|\bstartup\b|\bthesis\b"),
        ("habit", r"\busually\b|\broutine\b|\bhabit\b|\btends? to\b|\boften\b|\bdrinks?\b|\beats?\b|\bsleeps?\b"),
        ("reference", r"https?://|\bwww\."),
    )
)
PROSPECTIVE_WORDS = re.compile(r"\bupcoming\b|\bcoming up\b|\bdeadline\b|\bdue (?:on|in|by)\b", re.IGNORECASE)
# Every category and tier this package may name, for the test that holds them to the app's.
CATEGORIES = frozenset(
    {OTHER, *(category for category, _ in (*SAFETY_WORDS, *OTHER_WORDS))}
    | {hint.category for _, hint in HEADING_HINTS if hint.category}
)
TIERS = frozenset({PROFILE, PROSPECTIVE})


def safety_category(text: str) -> str | None:
    """The safety category a fact's words name (allergy, injury, medical), if any."""
    return next((category for category, words in SAFETY_WORDS if words.search(text)), None)


# Where a fact is kept as safely as an allergy (the app's protected categories).
SAFETY_CATEGORIES = frozenset({category for category, _ in SAFETY_WORDS} | {"safety"})


def guess_category(text: str, *, heading: Heading, suggested: str | None = None) -> str:
    """A fact's category: safety first, and only on safety words (the fact's own, or its
    heading's, which alone give heading_of a safety hint); then the heading's hint; then
    `suggested` (a model's guess, which never files a fact under a safety category); then
    the fact's other words; `other` when nothing says."""
    if category := safety_category(text) or heading.category:
        return category
    if suggested and suggested not in SAFETY_CATEGORIES and suggested != OTHER:
        return suggested
    return next((category for category, words in OTHER_WORDS if words.search(text)), OTHER)


def guess_tier(text: str, *, heading: Heading) -> str:
    """Prospective under a heading of things to come, or when the fact says it is coming up."""
    return heading.tier or (PROSPECTIVE if PROSPECTIVE_WORDS.search(text) else PROFILE)
