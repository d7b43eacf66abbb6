"""The coach's words in a chat turn: a listener's, not an adviser's.

A reply takes in what changed or was just noted, reflects what the coach keeps that bears
on the message (chosen by `listening`, safety first), and asks one question; it never
writes advice its memory does not support (a demo has no knowledge of climbing or
cooking to give), and says once in a conversation, when asked for advice, that it is a
demo. What the coach writes down stays invisible: no word of saving or searching.

Nothing is said twice in a conversation: each sentence comes from a few ways of saying
it, and the first that no earlier reply used is taken; a memory already brought up comes
back, when it must (a safety note the message bears on), by a short name in other words.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from offline_coach.corrections import Changed, shares_a_word
from offline_coach.phrasing import capitalise, join_words, lower_first, second_person_words, stable_number
from offline_coach.prompt import Remembered
from offline_coach.recall import asks_what_is_remembered, due_question, remembered_reply
from offline_coach.topics import about
from offline_coach.wording import clause, used_in
from paste_splitter import domains_of

ASKS_FOR_HELP = re.compile(
    r"\?\s*$|^\s*(?:please\s+)?(?:plan|suggest|give|help|make|write|tell|recommend|sketch|map out|design)\b",
    re.IGNORECASE,
)
GREETING = re.compile(r"^\s*(?:hi|hello|hey|hiya|good (?:morning|afternoon|evening))\b", re.IGNORECASE)
GREETINGS = ("Hi! Good to see you.", "Hello again, good to hear from you.", "Hey, welcome back.")
DEMO = (
    "I'm the demo coach, so I listen rather than write plans or advice of my own; "
    "with a model connected, this is what it would build on."
)
# Each a way to say one thing, taken in order from the first no earlier reply used.
REFLECT = (
    "For this I'm going by what you've told me: {}.",
    "What I'm keeping in mind here: {}.",
    "This has to fit with what you've told me: {}.",
    "I'm holding on to this for it: {}.",
    "Here's what bears on it: {}.",
)
AGAIN_SAID = (
    "You told me {}.",
    "As I have it, {}.",
    "Going by what you said, {}.",
    "From what you've told me, {}.",
    "I still have that {}.",
    "Remember, {}.",
    "I haven't forgotten that {}.",
    "That still holds: {}.",
)
# On a message that tells rather than asks: what it sits beside.
BESIDE = (
    "That sits alongside what you've told me: {}.",
    "I'll put that next to what I already have: {}.",
    "That goes with what you said before: {}.",
    "Alongside that, I have this: {}.",
)
AGAIN = (
    "{} still comes first here.",
    "This still has to work around {}.",
    "I'm still keeping {} in front of everything else.",
    "{} is still the first thing I'm weighing.",
    "As before, {} shapes this.",
)
NOTED = (
    "Thanks, I'll keep in mind that {}.",
    "Good to know that {}.",
    "Noted: {}.",
    "Thanks for telling me that {}.",
)
NOTED_PLAIN = ("Thanks, I'll keep that in mind.", "Good to know, thank you.", "Thanks for telling me.")
UPDATED = ("Got it, I've changed that: {}.", "Thanks for putting me right, so {}.", "Understood: {}.")
# A new line no rule rewords into a clause stands on its own, as the person will find it.
UPDATED_LINE = ("Got it. As it stands now: {}.", "Thanks for putting me right. Now it's this: {}.")
DELETED = (
    "Understood: it's no longer the case that {}, so I've let it go.",
    "Got it: I won't go on as if {}.",
)
DELETED_PLAIN = (
    "Understood, I've let go of that: it no longer applies.",
    "Got it, that's behind us now, and I won't bring it up again.",
    "Thanks for telling me; I've dropped it.",
)
PROPOSED = (
    "Thanks for telling me. That note is one you gave me yourself, so the change waits for you to confirm it "
    "on your memory page.",
    "Thanks. Because you gave me that note yourself, the change is waiting on your memory page for you to confirm.",
)
# One question, on what the message is about: what a coach would need to know next.
QUESTIONS = {
    "timing": (
        "Which days and times do you have free this week?",
        "How much time can you give it on a usual day?",
        "What does a typical week look like for you right now?",
    ),
    "exercise": (
        "What would you like this to do for you?",
        "How did your body feel the last time you did something like it?",
        "What's the most you've done of it recently without any trouble?",
    ),
    "food": (
        "What do you usually enjoy eating at that time of day?",
        "What do you tend to have in the cupboard?",
        "How much time do you have to prepare it?",
    ),
    "sleep": (
        "What does a usual evening look like before you go to bed?",
        "How many hours are you getting on a typical night?",
        "What tends to keep you awake?",
    ),
    "medicine": (
        "What has your doctor or physio said about it so far?",
        "When did you last talk it over with your doctor?",
        "Is anything different from usual at the moment?",
    ),
}
AFTER_A_CHANGE = (
    "Has anything else changed that I should know about?",
    "Is there anything else I should update while we're at it?",
    "Is anything else different now?",
)
# The domains in the order their questions are asked: when, before what it is.
QUESTION_ORDER = ("timing", "food", "sleep", "medicine", "exercise")
SAFETY_QUESTION = ("Has anything changed with {} since you told me?", "How is {} at the moment?")
ANY_QUESTION = (
    "What matters most to you about this?",
    "Tell me more: what would make this go well for you?",
    "What have you tried so far?",
    "What would you like to get out of it?",
    "Where would you like to start?",
    "What's on your mind about it?",
)
STATEMENT_QUESTION = (
    "What else should I know about it?",
    "How long has that been the case?",
    "What would you like us to do with that?",
    "What comes next for you?",
    "How is that going for you at the moment?",
    "What else is going on for you this week?",
    "Is there anything about it you'd like to work on?",
)
SAFETY_CATEGORIES = frozenset({"injury", "allergy", "constraint", "safety", "medical"})
# Says a sentence unless an earlier reply (or this one) already did.
type _Fresh = Callable[..., str | None]
MOST_NAME_WORDS = 4
NOT_A_NAME = re.compile(r",|^(?:had|has|have|is|was|were|you|they|i)\b", re.IGNORECASE)
# The last resort of a reply whose every way of saying something was used: words of its own.
LAST_RESORT = "Tell me more about {}."


def chat_reply(
    *,
    user_text: str,
    bearing: Sequence[Remembered],
    changed: Sequence[Changed] = (),
    saved: Sequence[Remembered] = (),
    known: Sequence[Remembered] = (),
    earlier_replies: Sequence[str] = (),
) -> str:
    """The reply: what changed or was noted, what bears on the message, one question."""
    if asks_what_is_remembered(user_text):
        return remembered_reply(known, earlier_replies)
    said: list[str] = []

    def fresh(options: Sequence[str], *values: str) -> str | None:
        # Started at a place the message picks, so two conversations seldom open alike.
        start = stable_number(user_text) % len(options) if options else 0
        for option in [*options[start:], *options[:start]]:
            text = capitalise(option.format(*values))
            if not _said_before(text, [*earlier_replies, *said]):
                said.append(text)
                return text
        return None

    parts = [*_taken_in(changed, fresh), *_noted(saved, fresh)]
    if not parts and GREETING.match(user_text) and (greeting := fresh(GREETINGS)):
        parts.append(greeting)
    parts += _reflected(bearing, user_text, earlier_replies, fresh)
    if ASKS_FOR_HELP.search(user_text) and not any(DEMO in reply for reply in earlier_replies):
        parts.append(DEMO)
    question = due_question(known, earlier_replies) or _question(user_text, bearing, bool(changed), fresh)
    return "\n\n".join(_paragraphs([*parts, question]))


def asks_for_help(text: str) -> bool:
    """Whether the message asks something of the coach (a question, a request), rather than tells."""
    return bool(ASKS_FOR_HELP.search(text))


def _taken_in(changed: Sequence[Changed], fresh: _Fresh) -> list[str]:
    words = []
    for change in changed:
        if change.action == "proposed":
            words.append(fresh(PROPOSED))
        elif change.action == "deleted":
            reworded = clause(change.item)
            words.append((fresh(DELETED, reworded) if reworded else None) or fresh(DELETED_PLAIN))
        elif reworded := clause(change.item):
            words.append(fresh(UPDATED, reworded) or fresh(UPDATED_LINE, change.item.summary.rstrip(" .")))
        else:
            words.append(fresh(UPDATED_LINE, change.item.summary.rstrip(" .")))
    return [text for text in words if text]


def _noted(saved: Sequence[Remembered], fresh: _Fresh) -> list[str]:
    # The note as the person said it ("you're a baker, so you start work at 4am"), where the
    # one line of it may have left something out.
    told = [replace(item, summary=item.content.split("\n")[0]) if item.content else item for item in saved]
    clauses = [reworded for item in told if (reworded := clause(item))]
    if saved and len(clauses) == len(saved):
        return [text] if (text := fresh(NOTED, join_words(clauses))) else []
    return [text] if saved and (text := fresh(NOTED_PLAIN)) else []


def _reflected(bearing: Sequence[Remembered], user_text: str, earlier: Sequence[str], fresh: _Fresh) -> list[str]:
    """A sentence (or a short list) of what bears on the message and was not brought up in
    this conversation; and, in other words, what was, when it bears again."""
    new = [item for item in bearing if not any(used_in(item, reply) for reply in earlier)]
    again = [item for item in bearing if item not in new]
    asking = asks_for_help(user_text)
    parts = []
    clauses = [reworded for item in new if (reworded := clause(item))]
    # Clauses with commas of their own read as one list only on separate lines.
    if new and len(clauses) == len(new) and (len(clauses) == 1 or not any("," in text for text in clauses)):
        parts.append(fresh(REFLECT if asking else BESIDE, join_words(clauses)))
    elif new:
        # The same words, leading a list: "What I'm keeping in mind here:" and a line each.
        lead = fresh([option.removesuffix(" {}.") for option in (REFLECT if asking else BESIDE)])
        parts.append("\n".join([lead or REFLECT[0].removesuffix(" {}."), *(f"- {_line(item)}" for item in new)]))
    named = [item for item in again if _short_name(item) and not shares_a_word(user_text, item)]
    if named:
        parts.append(fresh(AGAIN, join_words([_short_name(item) or "" for item in named])))
    if said_again := [reworded for item in again if item not in named and (reworded := clause(item))]:
        parts.append(fresh(AGAIN_SAID, join_words(said_again)) or fresh(BESIDE, join_words(said_again)))
    return [text for text in parts if text]


def _short_name(item: Remembered) -> str | None:
    """ "your right wrist", "your allergy to sesame": a safety note named again in a few words,
    where its words give a name; None where they do not."""
    if item.category == "allergy" and "allergic to" in item.summary.lower():
        return about(item)
    condition = item.summary.split(":", 1)[0].strip()
    if item.category == "injury" and len(condition.split()) <= MOST_NAME_WORDS and not NOT_A_NAME.search(condition):
        return about(item)
    return None


def _question(user_text: str, bearing: Sequence[Remembered], changed: bool, fresh: _Fresh) -> str:
    """One question, the most particular first: how an injury the message bears on is, then
    what its domain needs to know, then anything a listener asks."""
    domains = domains_of(user_text)
    injuries = [name for item in bearing if item.category == "injury" and (name := _short_name(item))]
    groups: list[Sequence[str]] = [AFTER_A_CHANGE] if changed else []
    if asks_for_help(user_text):
        groups += [[option.format(name) for option in SAFETY_QUESTION] for name in injuries[:1]]
        groups += [QUESTIONS[domain] for domain in QUESTION_ORDER if domain in domains]
        groups += [ANY_QUESTION, STATEMENT_QUESTION]
    else:
        groups += [STATEMENT_QUESTION, ANY_QUESTION]
    for group in groups:
        if question := fresh(group):
            return question
    return LAST_RESORT.format(lower_first(" ".join(user_text.split()[:6]).rstrip("?.!,")))


def _line(item: Remembered) -> str:
    """A memory on a list line of its own, where its words can stand as they were written."""
    reworded = clause(item)
    return capitalise(reworded) if reworded else second_person_words(item.summary.rstrip(" ."))


def _said_before(text: str, replies: Sequence[str]) -> bool:
    return any(text in reply for reply in replies)


def _paragraphs(parts: Sequence[str | None]) -> list[str]:
    """Sentences run together as one paragraph; a list stands on its own."""
    paragraphs: list[str] = []
    for part in parts:
        if not part:
            continue
        if paragraphs and "\n" not in part and "\n" not in paragraphs[-1]:
            paragraphs[-1] = f"{paragraphs[-1]} {part}"
        else:
            paragraphs.append(part)
    return paragraphs
