"""What in a user's message is worth remembering, as the notes a coach would write down.

Each recogniser reads one statement (a sentence, or the part of one where a new "I ..."
begins) and returns at most one note. A statement with a date in it is an intention ("a
talk in June"), so it does not also count as a goal or a schedule. Questions are never
statements. Notes with the same key are merged, so one message yields one note per key,
in the order the user said them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import date

from offline_coach.bag_of_words import STOP_WORDS
from offline_coach.dates import find_due_date, month_name
from offline_coach.notes import FIRST_PERSON, PAST, PROFILE, PROSPECTIVE, Found, Note, Recogniser
from offline_coach.phrasing import (
    as_sentence,
    capitalise,
    clause_end,
    clip,
    lower_first,
    normalise,
    sentences,
    slug,
    statements,
    swap_person,
)
from offline_coach.wording import SECOND_PERSON
from paste_splitter.categories import Heading, guess_category

SAFETY_CATEGORIES = frozenset({"injury", "allergy", "medical", "safety", "constraint"})


# A word that points back to what the statement before it said ("... at the pharmacy and I
# need to be there by 7am"): said on its own, the note would lose what it is about.
POINTS_BACK = re.compile(r"\b(?:there|then|that|it|them|those)\b", re.IGNORECASE)


def notes_in(text: str, *, today: date) -> list[Note]:
    """The memory-worthy statements in `text`, in order, one note per key: what a
    recogniser below reads, else what the shared classifier files under a category."""
    notes: list[Note] = []
    for statement, before in _with_the_one_before(text):
        if statement.endswith("?"):
            continue
        found = sorted(_found_in(statement, today), key=lambda item: item.start)
        notes.extend(item.note for item in found)
        if not found and (filed := _filed(statement, before=before)):
            notes.append(filed)
    return _merge_same_keys(notes)


def _with_the_one_before(text: str) -> list[tuple[str, str]]:
    """Each statement of `text`, with the statement before it in the same sentence when it
    points back to it ("" otherwise)."""
    pairs: list[tuple[str, str]] = []
    for sentence in sentences(text):
        said = statements(sentence)
        pairs += [(part, said[n - 1] if n and POINTS_BACK.search(part) else "") for n, part in enumerate(said)]
    return pairs


# The classifier's own word for what it cannot file, and what is not the person's lasting
# news: a passing state, or what they want to know now ("I want to know what to eat").
UNFILED = "other"
NOT_ABOUT_THEM = re.compile(
    r"\bi(?:'m| am) (?:a (?:bit|little|lot)|not sure|just)\b"
    r"|\bi (?:want|would like|'d like) to (?:know|ask|understand|check|see|talk|chat|say|tell|hear)\b",
    re.IGNORECASE,
)
FILED_KEY_WORDS = 3


def _filed(statement: str, *, before: str = "") -> Note | None:
    """A statement about the person that no recogniser reads ("I have type 1 diabetes and
    take insulin", "I'm coeliac", "I work night shifts", "No downhill running"), filed by
    the classifier the app's import uses, and said back to them ("You work night shifts"):
    a safety category whenever it names one; anything else only when said of the present,
    by the person of themselves. One that points back to the statement `before` it is said
    with it, so its one line still names what it is about."""
    if NOT_ABOUT_THEM.search(statement):
        return None
    category = guess_category(statement, heading=Heading())
    safety = category in SAFETY_CATEGORIES
    if category == UNFILED or not (safety or (FIRST_PERSON.search(statement) and not PAST.search(statement))):
        return None
    words = [word for word in re.findall(r"[\w-]+", statement.lower()) if word not in STOP_WORDS | {category}]
    # A safety note's key is the app's to give (a neutral one); the rest are named by topic.
    whole = f"{before.rstrip(' .!,;')} and {lower_first(statement)}" if before else statement
    said = clip(capitalise(swap_person(whole.rstrip(" .!"), SECOND_PERSON)))
    return Note(slug([*([] if safety else [category]), *words[:FILED_KEY_WORDS]]), PROFILE, category, said, f"{said}.")


def _found_in(sentence: str, today: date) -> list[Found]:
    found = [item for recognise in RECOGNISERS if (item := recognise(sentence, today))]
    return found


def _merge_same_keys(notes: list[Note]) -> list[Note]:
    merged: dict[str, Note] = {}
    for note in notes:
        earlier = merged.get(note.key)
        if earlier is None:
            merged[note.key] = note
        elif note.content not in earlier.content:
            summary = clip(f"{earlier.summary}; {lower_first(note.summary)}")
            merged[note.key] = replace(earlier, summary=summary, content=f"{earlier.content}\n{note.content}")
    return list(merged.values())


# Coaching style ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Style:
    pattern: re.Pattern[str]
    rule: str
    summary: str
    how: str


STYLES = (
    _Style(
        re.compile(
            r"\b(?:blunt|brutally honest|brutal honesty|straight talk|sugar-?coat\w*|tough love|no fluff"
            r"|(?:don't|do not) hold back|be direct|direct feedback|honest feedback|give it to me straight)\b",
            re.IGNORECASE,
        ),
        rule="Give blunt, direct feedback without sugar-coating",
        summary="Wants blunt, direct feedback, no sugar-coating",
        how="say plainly what isn't working and what to change; skip the cushioning.",
    ),
    _Style(
        re.compile(
            r"\b(?:keep (?:it|them|things|(?:your )?(?:answers|replies|responses|messages)) (?:short|brief|concise)"
            r"|(?:short|shorter|brief|concise) (?:answers|replies|responses|messages)"
            r"|to the point|less (?:text|waffle))\b",
            re.IGNORECASE,
        ),
        rule="Keep answers short",
        summary="Wants short, to-the-point answers",
        how="two or three sentences or a short list; no preamble, no recap.",
    ),
    _Style(
        re.compile(
            r"\b(?:more detail|in (?:more )?detail|detailed (?:answers|explanations|feedback|plans?)"
            r"|explain (?:the )?why)\b",
            re.IGNORECASE,
        ),
        rule="Explain the reasoning in detail",
        summary="Wants detailed explanations, with the why",
        how="give the reason behind each suggestion, with specifics and numbers.",
    ),
    _Style(
        re.compile(
            r"\b(?:be (?:gentle|kind|encouraging|patient) with me|go easy on me"
            r"|(?:gentle|encouraging|positive|kind|supportive) (?:feedback|coaching|approach|tone))\b",
            re.IGNORECASE,
        ),
        rule="Be gentle and encouraging",
        summary="Wants gentle, encouraging coaching",
        how="lead with what went well; frame changes as next steps, not failures.",
    ),
)


def _coaching_style(sentence: str, today: date) -> Found | None:
    matches = [(match, style) for style in STYLES if (match := style.pattern.search(sentence))]
    if not matches:
        return None
    styles = [style for _, style in matches]
    rules = " ".join(f"{style.rule}." for style in styles)
    how = " ".join(capitalise(style.how) for style in styles)
    content = f'{rules}\nWhy: they asked for it ("{sentence}").\nHow to apply: {how}'
    summary = clip("; ".join([styles[0].summary, *(lower_first(style.summary) for style in styles[1:])]))
    start = min(match.start() for match, _ in matches)
    return Found(start, Note("coaching-style", PROFILE, "feedback", summary, content))


# Intentions with a date --------------------------------------------------------------

EVENT = re.compile(
    r"\b(half marathon|full marathon|job interview|driving test|marathon|ultra|triathlon|race|5k|10k|talk"
    r"|presentation|keynote|exam|test|interview|wedding|trip|holiday|vacation|competition|tournament|match|meet"
    r"|deadline|launch|appointment|surgery|operation|conference|hike|recital|concert|performance|show|audition"
    r"|defence|defense|move|review|game|event|birthday|party|retreat|camp|new job)s?\b",
    re.IGNORECASE,
)
FUTURE = re.compile(
    r"\b(?:i'm|i am|i'll|i will|i've got|i have|going to|i need to|i must|i should|i plan|my [\w' ]+ (?:is|are))\b",
    re.IGNORECASE,
)
CLAUSE_START = re.compile(r"[,;:]\s*|\s(?:but|so|and)\s", re.IGNORECASE)
EVENT_KEY_WORDS = 2


def _intention(sentence: str, today: date) -> Found | None:
    due = find_due_date(sentence, today)
    if due is None or PAST.search(sentence):
        return None
    event = EVENT.search(sentence)
    if event:
        event_words = event.group(1).lower().split()
    elif FUTURE.search(sentence):
        before = sentence[: due.start] or sentence[due.end :]
        event_words = [word for word in re.findall(r"[\w-]+", before.lower()) if word not in STOP_WORDS]
        event_words = event_words[-EVENT_KEY_WORDS:]
    else:
        return None
    starts = [match.end() for match in CLAUSE_START.finditer(sentence[: due.start])]
    clause_start = starts[-1] if starts else 0
    summary = said_to_them(sentence[clause_start : clause_end(sentence, due.end)])
    if due.relative:
        summary = f"{summary} ({due.label})"
    note = Note(
        slug([*event_words, month_name(due.day).lower()]),
        PROSPECTIVE,
        "project",
        clip(summary),
        f"{as_sentence(said_to_them(sentence))}\nDue: {due.label}.",
        due.due_at,
    )
    return Found(clause_start, note)


# Intentions without a date ------------------------------------------------------------

SOME_DAY = re.compile(
    r"\b(?:at some point|some day|someday|one day|later on|another time|down the line|when there's time"
    r"|(?:come|get|go) back to)\b",
    re.IGNORECASE,
)
INTENDING = re.compile(r"\b(?:let's|lets|let us|i'd like to|i want to|i'll|i will|we should|i should)\b", re.IGNORECASE)
TOPIC_KEY_WORDS = 2
INTENT_VERBS = frozenset({"work", "look", "talk", "think", "try", "do", "get", "go", "come", "back", "lets"})


def _undated_intention(sentence: str, today: date) -> Found | None:
    """ "Let's come back to my pacing at some point": something to bring up next time."""
    if find_due_date(sentence, today) is not None or PAST.search(sentence):
        return None
    some_day = SOME_DAY.search(sentence)
    intending = INTENDING.search(sentence)
    if some_day is None or intending is None:
        return None
    # The topic is what is left once the "some day" and the "let's" are taken out.
    rest = INTENDING.sub(" ", SOME_DAY.sub(" ", sentence))
    topic = [word for word in re.findall(r"[\w-]+", rest.lower()) if word not in STOP_WORDS | INTENT_VERBS]
    if not topic:
        return None
    start = intending.start()
    summary = said_to_them(sentence[start:])
    note = Note(
        slug([*topic[-TOPIC_KEY_WORDS:], "later"]),
        PROSPECTIVE,
        "project",
        clip(summary),
        f"{as_sentence(said_to_them(sentence))}\nNo date: bring it up at the next conversation.",
        None,
    )
    return Found(start, note)


def said_to_them(clause: str) -> str:
    """What the person said of themselves, said back to them as a memory's line, the fact
    whole: "I'm giving a talk in June" -> "You're giving a talk in June"."""
    return capitalise(swap_person(normalise(clause).rstrip(" .!?,;:"), SECOND_PERSON))


RECOGNISERS: tuple[Recogniser, ...] = (_coaching_style, _intention, _undated_intention)
