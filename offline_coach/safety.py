"""The safety statements the offline coach notes: injuries, allergies, intolerances,
medication and food a person will not eat. Each recogniser reads one statement and returns at most one note."""

from __future__ import annotations

import re
from datetime import date

from offline_coach.notes import PROFILE, Found, Note
from offline_coach.phrasing import (
    as_sentence,
    capitalise,
    clause_end,
    clip,
    join_words,
    lower_first,
    slug,
    summarise_clause,
    third_person,
)

# Injuries ----------------------------------------------------------------------------

BODY_PART = re.compile(
    r"\b(?:(left|right)\s+)?(lower back|upper back|rotator cuff|back|neck|shoulder|elbow|wrist|hand|hip|knee|ankle"
    r"|foot|feet|hamstring|achilles|calf|groin|shin|quad|glute|acl|meniscus|spine|toe|finger|thumb)s?\b",
    re.IGNORECASE,
)
# "I'm back from holiday" is not about a back.
NOT_A_BODY_PART = re.compile(r"\b(?:i'm|i am|be|been|come|came|coming|get|got|getting|go|going|went|bounce)\s+$", re.I)
INJURY_ADJECTIVES = {
    "bad": "Bad",
    "injured": "Injured",
    "hurt": "Hurt",
    "sore": "Sore",
    "painful": "Painful",
    "torn": "Torn",
    "tore": "Torn",
    "sprained": "Sprained",
    "broken": "Broken",
    "broke": "Broken",
    "strained": "Strained",
    "pulled": "Pulled",
    "weak": "Weak",
    "dodgy": "Dodgy",
    "tweaked": "Tweaked",
    "dislocated": "Dislocated",
    "stiff": "Stiff",
    "damaged": "Damaged",
    "fractured": "Fractured",
    "ruptured": "Ruptured",
    "swollen": "Swollen",
    "inflamed": "Inflamed",
}
INJURY_NOUNS = {
    "impingement": "impingement",
    "tendinitis": "tendinitis",
    "tendonitis": "tendonitis",
    "bursitis": "bursitis",
    "surgery": "surgery",
    "operation": "surgery",
    "tear": "tear",
    "sprain": "sprain",
    "strain": "strain",
    "fracture": "fracture",
    "arthritis": "arthritis",
    "injury": "injury",
    "pain": "pain",
    "problem": "problems",
    "problems": "problems",
    "issue": "issues",
    "issues": "issues",
    "trouble": "trouble",
    "replacement": "replacement",
}
INJURY_CUE = re.compile(r"\b(" + "|".join([*INJURY_ADJECTIVES, *INJURY_NOUNS]) + r")\b", re.IGNORECASE)
INJURY_REACH_CHARS = 20
HEALED = re.compile(r"\b(?:no longer|anymore|any more|healed|recovered|fine now)\b", re.IGNORECASE)
CONSTRAINT = re.compile(
    r"\b(?:no|avoid|avoiding|can't|cannot|can not|shouldn't|should not|mustn't|must not|not allowed to"
    r"|not supposed to|nothing|stay away from|steer clear of|without)\s+(?!longer\b|problems?\b|pain\b|issues?\b)",
    re.IGNORECASE,
)


def injury(sentence: str, today: date) -> Found | None:
    if HEALED.search(sentence):
        return None
    for part in BODY_PART.finditer(sentence):
        if part.group(2).lower() == "back" and NOT_A_BODY_PART.search(sentence[: part.start()]):
            continue
        cue = _nearest_cue(sentence, part)
        if cue is None:
            continue
        side = (part.group(1) or "").lower()
        body = _body_part_name(part.group(2))
        place = f"{side} {body}".strip()
        word = cue.group(1).lower()
        condition = f"{place} {INJURY_NOUNS[word]}" if word in INJURY_NOUNS else f"{INJURY_ADJECTIVES[word]} {place}"
        constraint = _constraint(sentence, avoid=(part.start(), part.end()))
        summary = f"{capitalise(condition)}: {constraint}" if constraint else capitalise(condition)
        note = Note(slug([side, body]), PROFILE, "injury", clip(summary), as_sentence(third_person(sentence)))
        return Found(min(part.start(), cue.start()), note)
    return None


def _nearest_cue(sentence: str, part: re.Match[str]) -> re.Match[str] | None:
    def distance(cue: re.Match[str]) -> int:
        return max(cue.start() - part.end(), part.start() - cue.end(), 0)

    cues = [cue for cue in INJURY_CUE.finditer(sentence) if distance(cue) <= INJURY_REACH_CHARS]
    return min(cues, key=distance) if cues else None


def _body_part_name(word: str) -> str:
    lower = word.lower()
    return {"feet": "foot", "acl": "ACL"}.get(lower, lower)


def _constraint(sentence: str, *, avoid: tuple[int, int]) -> str:
    for match in CONSTRAINT.finditer(sentence):
        if avoid[0] <= match.start() < avoid[1]:
            continue
        text = sentence[match.start() : clause_end(sentence, match.end())].strip()
        return lower_first(third_person(text))
    return ""


# Allergies ---------------------------------------------------------------------------

ALLERGY_AFTER = re.compile(r"\b(?:allergic to|allerg(?:y|ies) to)\s+", re.IGNORECASE)
ALLERGY_BEFORE = re.compile(r"([\w-]+(?:\s+[\w-]+)?)\s+allerg(?:y|ies)\b", re.IGNORECASE)
NOT_ALLERGENS = frozenset(
    """
    a an my the severe mild serious bad slight strong food have has got i with bit of
    life-threatening all any
    """.split()  # noqa: SIM905 - a word list reads best as words
)
COUNTABLE = frozenset(
    """
    nut peanut egg almond cashew walnut hazelnut pistachio strawberry tomato prawn seed kiwi banana
    sting
    """.split()  # noqa: SIM905 - a word list reads best as words
)
LIST_SEPARATOR = re.compile(r",\s*|\s+(?:and|or)\s+", re.IGNORECASE)


def allergy(sentence: str, today: date) -> Found | None:
    allergens, start = _allergens(sentence)
    if not allergens:
        return None
    note = Note(
        slug(["allergy", *allergens]),
        PROFILE,
        "allergy",
        clip(f"Allergic to {join_words(allergens)}"),
        as_sentence(third_person(sentence)),
    )
    return Found(start, note)


def _allergens(sentence: str) -> tuple[list[str], int]:
    if after := ALLERGY_AFTER.search(sentence):
        listed = sentence[after.end() : clause_end(sentence, after.end())]
        return _clean_allergens(LIST_SEPARATOR.split(listed)), after.start()
    if before := ALLERGY_BEFORE.search(sentence):
        return _clean_allergens([before.group(1)]), before.start()
    return [], 0


def _clean_allergens(raw: list[str]) -> list[str]:
    allergens = []
    for item in raw:
        words = [word for word in item.lower().split() if word not in NOT_ALLERGENS][:3]
        if words:
            allergens.append(" ".join([*words[:-1], _plural(words[-1])]))
    return allergens


def _plural(word: str) -> str:
    if word not in COUNTABLE:
        return word
    if word.endswith("y"):
        return word[:-1] + "ies"
    return word + ("es" if word.endswith("o") else "s")


INTOLERANCE = re.compile(r"\b(lactose|gluten|fructose|histamine|wheat|dairy|soy|egg)[- ]intoleran(?:t|ce)\b", re.I)


def intolerance(sentence: str, today: date) -> Found | None:
    match = INTOLERANCE.search(sentence)
    if not match:
        return None
    food = match.group(1).lower()
    note = Note(
        slug(["intolerance", food]),
        PROFILE,
        "allergy",
        f"{capitalise(food)} intolerant",
        as_sentence(third_person(sentence)),
    )
    return Found(match.start(), note)


# Medication ---------------------------------------------------------------------------

MEDICINE = (
    r"medication|medications|medicine|medicines|meds|pills|tablets|insulin|an inhaler|inhalers?|blood thinners?"
    r"|beta[- ]blockers?|statins?|antidepressants?|steroids?|warfarin|metformin|levothyroxine|the pill"
)
MEDICATION = re.compile(
    r"\bi(?:'m| am)?\s+(take|taking|on|use|using|was prescribed|have been prescribed|am prescribed)\s+"
    rf"((?:[\w-]+\s+){{0,3}}?(?:{MEDICINE}))\b(\s+for\s+[\w\s-]+)?",
    re.IGNORECASE,
)
MEDICATION_VERBS = {"use": "Uses", "using": "Uses"}


def medication(sentence: str, today: date) -> Found | None:
    match = MEDICATION.search(sentence)
    if not match:
        return None
    verb = MEDICATION_VERBS.get(match.group(1).lower(), "Takes")
    what = match.group(2)
    purpose = match.group(3).split(maxsplit=1)[1].strip() if match.group(3) else ""
    summary = f"{verb} {lower_first(what)}" + (
        f" for {lower_first(third_person(purpose)).rstrip('.')}" if purpose else ""
    )
    constraint = _constraint(sentence, avoid=(match.start(), match.end()))
    words = [word for word in what.lower().split() if word not in {"medication", "my", "some", "an", "a", "the"}]
    note = Note(
        slug(["medication", *words[-3:]]),
        PROFILE,
        "medical",
        clip(f"{summary}: {constraint}" if constraint else summary),
        as_sentence(third_person(sentence)),
    )
    return Found(match.start(), note)


# Food they will not eat ----------------------------------------------------------------

DIET_LABEL = re.compile(
    r"\bi(?:'m| am) (?:a |an )?((?:strict |mostly |fully )?(?:vegetarian|vegan|pescatarian|pescetarian|plant-based"
    r"|teetotal|gluten-free|dairy-free|kosher|halal))\b",
    re.IGNORECASE,
)
DIET_REFUSAL = re.compile(r"\bi (?:don't|do not|never|can't|cannot|won't) (?:eat|drink)\s+\w", re.IGNORECASE)


def diet(sentence: str, today: date) -> Found | None:
    if label := DIET_LABEL.search(sentence):
        summary, start = capitalise(label.group(1).lower()), label.start()
    elif refusal := DIET_REFUSAL.search(sentence):
        clause = sentence[refusal.start() : clause_end(sentence, refusal.end())]
        summary, start = summarise_clause(clause), refusal.start()
    else:
        return None
    return Found(start, Note("diet", PROFILE, "constraint", clip(summary), as_sentence(third_person(sentence))))


# Limits on training ------------------------------------------------------------------

# "No downhill running", "avoid jumping", "I can't do burpees": a limit on what they train,
# said alone (an injury's own limit is part of the injury's note).
ACTIVITY_LIMIT = re.compile(
    r"^(?:please,?\s+)?(?:no|avoid|avoiding|i (?:can't|cannot|shouldn't|mustn't) do|i(?:'m| am) not allowed to do)\s+"
    r"((?:[\w-]+\s+){0,2}?(?:running|runs|jumping|jumps|lifting|squats?|squatting|sprints?|sprinting|hills?"
    r"|burpees|lunges|deadlifts?|pressing|presses|swimming|cycling|impact|plyometrics|hiking|climbing))\b",
    re.IGNORECASE,
)


def activity_limit(sentence: str, today: date) -> Found | None:
    match = ACTIVITY_LIMIT.search(sentence)
    if match is None or (BODY_PART.search(sentence) and INJURY_CUE.search(sentence)):
        return None
    summary = f"No {match.group(1).lower()}"
    return Found(
        0,
        Note(
            slug(["no", *match.group(1).split()]),
            PROFILE,
            "constraint",
            clip(summary),
            as_sentence(third_person(sentence)),
        ),
    )
