"""Whether a fact says otherwise than another one about the same thing: "trip to Kalymnos
in May" and "trip to Kalymnos in June", "you're a pharmacist" and "you teach chemistry".

Two facts about one thing say otherwise when they name it by a word of its own (the trip,
Kalymnos, rehearsals) and give it another month, other days or another time of day; or
when both say what the person does for a living, or where they live, and name different
things. Facts that may both be true ("allergic to peanuts", "allergic to cashews"; a run
on Tuesdays and a swim on Fridays) never do. Pure, like the rest of the package: the app's
import asks it of each fact it proposes and the memories its retrieval finds alike.
"""

from __future__ import annotations

import calendar
import re

MONTH = re.compile(
    r"\b(?:January|February|March|April|June|July|August|September|October|November|December"
    r"|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)\b\.?|\bMay\b",
    re.IGNORECASE,
)
WEEKDAY = re.compile(r"\b(?:mon|tues?|wed(?:nes)?|thu(?:rs?)?|fri|sat(?:ur)?|sun)(?:day)?s?\b", re.IGNORECASE)
TIME = re.compile(r"\b(\d{1,2})(?::(\d{2}))?\s?(am|pm)\b|\b(\d{1,2}):(\d{2})\b", re.IGNORECASE)
WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
STOP = frozenset(
    """a an the and or but so of to in on at by for with from as into about over under up out i me my you your
    yours we our they their he she it its this that these those is am are was were be been being do does did have
    has had will would can could should may might must just very really also too than now then there here not no
    every each all some any most more much only still usually mostly always often sometimes around early late
    morning mornings evening evenings afternoon afternoons night nights week weeks weekly day days daily time
    times start starts started get gets go goes going want wants like likes one two three four five""".split()  # noqa: SIM905 - a word list reads best as words
)
# Words that are what the facts compare, not what they are about.
SLOT_WORDS = frozenset(
    {name.lower() for name in (*calendar.month_name[1:], *calendar.month_abbr[1:], *calendar.day_name)}
    | {f"{name.lower()}s" for name in calendar.day_name}
    | {"am", "pm", "sept", "tues", "thurs"}
)
# A prefix this long, shared, makes two words one ("rehearse", "rehearsals"; "climb", "climbing").
SHARED_PREFIX = 5

JOBS = (
    r"nurse|doctor|surgeon|dentist|pharmacist|physio(?:therapist)?|therapist|midwife|paramedic|vet|teacher|lecturer"
    r"|professor|tutor|student|engineer|developer|programmer|designer|architect|accountant|lawyer|solicitor"
    r"|barrister|manager|consultant|analyst|scientist|researcher|chemist|journalist|writer|editor|author|artist"
    r"|musician|photographer|chef|cook|baker|butcher|barista|waiter|waitress|bartender|cleaner|carpenter"
    r"|plumber|electrician|mechanic|builder|farmer|gardener|driver|pilot|firefighter|police officer|soldier"
    r"|librarian|receptionist|cashier|banker|clerk|secretary|administrator|technician|salesperson|shop assistant"
    r"|carer|social worker|civil servant|entrepreneur|founder|freelancer|retiree|pensioner"
)
# What the person does for a living: the job itself, what they teach, where they work.
WORK = re.compile(
    rf"\b(?:(?:you're|you are|i'm|i am|works? as|working as|job as|career as|trained as|is) an? (?P<job>{JOBS})s?\b"
    rf"|(?P<teach>teach(?:es|ing)?) (?P<subject>[a-z]+)"
    rf"|works? (?:at|for|in) (?:an? |the )?(?P<place>[a-z][a-z' ]*?)(?=[,.;]|\band\b|$)"
    rf"|(?P<retired>retired))",
    re.IGNORECASE,
)
HOME = re.compile(r"\b(?:live|lives|living|based|moved) (?:in|to) (?P<place>[A-Z][\w'-]*(?: [A-Z][\w'-]*)*)")


def says_otherwise(fact: str, other: str) -> str | None:
    """What `fact` says otherwise than `other` (both as a person reads them): "the month",
    "the days", "the time", "your work" or "where you live"; None when they may both be so."""
    for what, values in (("your work", _work), ("where you live", _home)):
        mine, theirs = values(fact), values(other)
        # A pharmacist at the pharmacy is one job, told two ways: only names that share no
        # word say otherwise.
        if mine and theirs and not _topic_words(" ".join(mine)) & _topic_words(" ".join(theirs)):
            return what
    if not _topic_words(fact) & _topic_words(other):
        return None
    for what, values in (("the month", _months), ("the days", _weekdays), ("the time", _times)):
        mine, theirs = values(fact), values(other)
        if mine and theirs and mine != theirs:
            return what
    return None


def _months(text: str) -> frozenset[str]:
    # "May" is a month only when written as one: "you may want to" is not.
    return frozenset(
        match.group(0).rstrip(".")[:3].lower() for match in MONTH.finditer(text) if match.group(0) != "may"
    )


def _weekdays(text: str) -> frozenset[str]:
    return frozenset(match.group(0)[:3].lower() for match in WEEKDAY.finditer(text))


def _times(text: str) -> frozenset[str]:
    found = set()
    for match in TIME.finditer(text):
        if match.group(3):
            hour, minute = int(match.group(1)) % 12 + (12 if match.group(3).lower() == "pm" else 0), match.group(2)
        else:
            hour, minute = int(match.group(4)), match.group(5)
        found.add(f"{hour:02d}:{minute or '00'}")
    return frozenset(found)


def _work(text: str) -> frozenset[str]:
    named = set()
    for match in WORK.finditer(text):
        if match.group("job"):
            named.add(match.group("job").lower())
        elif match.group("teach"):
            named.add(f"teaching {match.group('subject').lower()}")
        elif match.group("place") and not re.match(r"\d", match.group("place")):
            named.add(f"at {' '.join(match.group('place').lower().split())}")
        elif match.group("retired"):
            named.add("retired")
    return frozenset(named)


def _home(text: str) -> frozenset[str]:
    return frozenset(match.group("place").lower() for match in HOME.finditer(text))


def _topic_words(text: str) -> set[str]:
    words = {word for word in WORD.findall(text.lower()) if word not in STOP and word not in SLOT_WORDS}
    words = {word for word in words if not word.isdigit() and not TIME.fullmatch(word)}
    return {word[:SHARED_PREFIX] if len(word) > SHARED_PREFIX else word for word in words}
