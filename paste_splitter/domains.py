"""What a message or a memory is about, of the few things where a safety note matters or a
schedule does: exercise, food, sleep, medicine, and when things happen. One classifier for
both sides: the offline coach asks it of a message and of each memory it keeps, so a
question about food finds the allergy however the allergy was worded.

A safety category names its domains outright (an injury is about exercise whatever its
words), and a memory's own words add to them: "No downhill running" is a constraint about
exercise, "Doesn't eat meat" one about food.
"""

from __future__ import annotations

import re

from paste_splitter.categories import safety_category

EXERCISE, FOOD, SLEEP, MEDICINE, TIMING = "exercise", "food", "sleep", "medicine", "timing"

DOMAIN_WORDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (domain, re.compile(pattern, re.IGNORECASE))
    for domain, pattern in (
        (
            EXERCISE,
            r"\b(?:train|exercis|work ?out|gym|run|jog|lift|squat|stretch|swim|cycl|bike|hike|hiking|walk|climb"
            r"|row|yoga|pilates|sport|race|marathon|interval|session|sets?\b|reps?\b|hangs?\b|fingerboard|boulder"
            r"|practi[cs]e|kneel|garden|dance|fitness|strength|cardio)",
        ),
        (
            FOOD,
            r"\b(?:eat|food|meal|breakfast|lunch|dinner|snack|cook|bake|baking|recipe|diet|nutrition|fuel|carb"
            r"|protein|drink|allerg|intoleran|coeliac|celiac|gluten|lactose|dairy|vegan|vegetarian|nuts?\b|peanut"
            r"|shellfish|sesame|mustard|meat)",
        ),
        (SLEEP, r"\b(?:sleep|tired|insomnia|nap|fatigue|exhausted|bed\b|bedtime|wake|awake|rest\b|night shifts?)"),
        (
            MEDICINE,
            r"\b(?:medic|pills?\b|tablets?\b|insulin|inhaler|dose|prescri|drug|painkiller|ibuprofen|paracetamol"
            r"|diabet|asthma|blood pressure|heart|doctor|physio|surgery|condition)",
        ),
        (
            TIMING,
            r"\b(?:when\b|what time|time of day|schedule|plan|week\b|weekly|today|tomorrow|weekend|morning|evening"
            r"|afternoon|(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b|\d{1,2}(?::\d{2})?\s?(?:am|pm)\b|shifts?\b"
            r"|(?:office|working|work|opening) hours|nine to five|9 to 5|rehears|split my)",
        ),
    )
)
# What a safety category is about, whatever its words say.
CATEGORY_DOMAINS = {
    "injury": frozenset({EXERCISE}),
    "allergy": frozenset({FOOD, MEDICINE}),
    "medical": frozenset({EXERCISE, FOOD, SLEEP, MEDICINE}),
    "safety": frozenset({EXERCISE, FOOD, SLEEP, MEDICINE}),
    "constraint": frozenset(),
    "schedule": frozenset({TIMING}),
}
# The domains where every safety note is considered, whichever one the question names.
SAFETY_DOMAINS = frozenset({EXERCISE, FOOD, SLEEP, MEDICINE})


def domains_of(text: str, *, category: str = "") -> frozenset[str]:
    """The domains `text` is about; with a memory's `category`, those it names besides."""
    found = {domain for domain, words in DOMAIN_WORDS if words.search(text)}
    # What the import's classifier calls a safety fact ("a stress fracture in my right shin")
    # is about what its category is, whatever the memory was filed under.
    named = safety_category(text) or ""
    return frozenset(found) | CATEGORY_DOMAINS.get(category, frozenset()) | CATEGORY_DOMAINS.get(named, frozenset())
