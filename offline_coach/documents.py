"""The coach's written pieces: a session summary, a weekly episode and a follow-up email.

Each is built only from what the request contains. An email never reads like the
previous ones the request lists: it takes a different greeting, opening, template and
focus item than any of them, chosen deterministically.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from offline_coach.bag_of_words import STOP_WORDS, WORD
from offline_coach.crisis import crisis_in
from offline_coach.phrasing import as_sentence, capitalise, clip, first_sentence, join_words, lower_first
from offline_coach.prompt import (
    Remembered,
    conversation,
    previous_emails,
    remembered,
    request_text,
    user_name,
)
from offline_coach.statements import notes_in
from offline_coach.topics import about, due_date, injury_limit, is_referable, mentioned_in, referral_rank
from offline_coach.wording import clause

THEME_COUNT = 3
QUOTE_CHARS = 140
CHAT_WORDS = frozenset(
    """
    hello thanks thank yeah okay today think know feel felt feeling want like good great going maybe well
    much more time week would could about what that this have been doing make need with sure also still
    really after before easy fine bit lot stuff thing things talked said went got
    """.split()  # noqa: SIM905 - a word list reads best as words
)
# Lines of a weekly request that describe a session: bullets, numbers or "Session ...".
SESSION_LINE = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)]|session\b)\s*(.+)$", re.IGNORECASE)
# "Session 2 (Tue): ", "2025-05-06 - ": the label before what a session line says.
SESSION_LABEL = re.compile(
    r"^(?:session\s*\d*|\d{4}-\d{2}-\d{2}|(?:mon|tue|wed|thu|fri|sat|sun)\w*|\([^)]*\)|[\s,])*[:\-\u2013]\s*",
    re.IGNORECASE,
)


def session_summary(messages: list[dict[str, Any]], *, today: date) -> str:
    """2-4 sentences on one session: what it was about, what is worth keeping, where it ended."""
    lines = conversation(messages)
    user_lines = [line.text for line in lines if line.role == "user"]
    if not lines:
        return "There was no conversation to summarise in this session. Nothing new came up."
    sentences = [f"In this session ({_count(len(lines), 'message')}) they talked about {_themes(user_lines)}."]
    if worth := _worth_keeping(user_lines, today):
        sentences.append(f"Worth keeping in mind: {worth}.")
    if coach_lines := [line.text for line in lines if line.role == "assistant"]:
        sentences.append(
            f"The coach's last suggestion: {as_sentence(clip(first_sentence(coach_lines[-1]), QUOTE_CHARS))}"
        )
    elif user_lines:
        sentences.append(f"It ended with: {as_sentence(clip(first_sentence(user_lines[-1]), QUOTE_CHARS))}")
    return " ".join(sentences)


def weekly_episode(messages: list[dict[str, Any]], *, today: date) -> str:
    """2-4 sentences on the week's sessions listed in the request."""
    sessions = _session_lines(messages)
    if not sessions:
        return "A quiet week: no sessions to summarise. Next week is a fresh start."
    sentences = [
        f"This week had {_count(len(sessions), 'session')}.",
        f"The focus was on {_themes(sessions)}.",
    ]
    if worth := _worth_keeping(sessions, today, standing_only=True):
        sentences.append(f"Along the way: {worth}.")
    sentences.append(f"Most recently: {as_sentence(clip(lower_first(sessions[-1]), QUOTE_CHARS))}")
    return " ".join(sentences)


@dataclass(frozen=True)
class _Template:
    signature: str
    subject: str
    lines: tuple[str, ...]
    sign_off: str


# With nothing remembered to focus on, every template still says something useful.
NO_FOCUS_DETAIL = "Even one short session this week keeps the momentum going."
GREETINGS = ("Hi {name},", "Hello {name},", "Hey {name},", "Dear {name},")
OPENINGS = (
    "Hope your week is off to a good start.",
    "Just checking in on you.",
    "I was thinking about our last conversation.",
    "It's been a few days, so here's a friendly nudge.",
    "A quick note before the week gets busy.",
)
TEMPLATES = (
    _Template(
        "looking ahead",
        "Looking ahead: {focus}",
        ("I've been thinking about {focus}.", "{detail}", "{support}", "Tell me in the chat what time suits you."),
        "Talk soon,",
    ),
    _Template(
        "a quick check-in",
        "A quick check-in on {focus}",
        ("How are things going with {focus}?", "{detail}", "{support}", "Even one line in the chat helps me plan."),
        "Cheering you on,",
    ),
    _Template(
        "one small step",
        "One small step for this week",
        ("Here's one small, doable step for the week: set aside twenty minutes for {focus}.", "{detail}", "{support}"),
        "Speak soon,",
    ),
    _Template(
        "picking up where we left off",
        "Picking up where we left off",
        ("Last time, {focus} came up, and I wanted to follow through.", "{detail}", "{support}"),
        "All the best,",
    ),
)


# How the app asks for a check-in about one dated intention (emails/drafting.py).
CHECK_IN_ASK = re.compile(r"check-in about something they have coming up on (\d{4}-\d{2}-\d{2}): “([^”]+)”")
CHECK_IN_TEMPLATES = (
    _Template(
        "how is it going",
        "How is {focus} coming along?",
        ("{when}, so I wanted to ask how the preparation is going.", "{step}", "{support}"),
        "Rooting for you,",
    ),
    _Template(
        "counting down",
        "Counting down to {focus}",
        ("{when}. How are you feeling about it?", "{step}", "{support}", "Tell me in the chat where it stands."),
        "With you all the way,",
    ),
)


def follow_up_email(messages: list[dict[str, Any]], *, today: date) -> str:
    """`Subject: ...`, a blank line, then a short plain-text email unlike the previous ones."""
    items = remembered(messages)
    previous = [email.lower() for email in previous_emails(messages)]
    if asked := CHECK_IN_ASK.search(request_text(messages)):
        return _check_in(
            messages, items, previous, due=date.fromisoformat(asked.group(1)), what=asked.group(2), today=today
        )
    focus = _focus(items, previous)
    template = _unused(TEMPLATES, previous, lambda template: template.signature)
    greeting = _unused(GREETINGS, previous, lambda greeting: greeting.split()[0] + " ").format(
        name=user_name(messages) or "there"
    )
    opening = _unused(OPENINGS, previous, lambda opening: opening)
    fields = {
        "focus": about(focus) if focus else "your training",
        "detail": _detail(focus, today) if focus else NO_FOCUS_DETAIL,
        "support": _support(items, focus, previous),
    }
    body = [opening, *(line.format(**fields) for line in template.lines)]
    paragraph = " ".join(line for line in body if line)
    subject = capitalise(template.subject.format(**fields))
    return f"Subject: {subject}\n\n{greeting}\n\n{paragraph}\n\n{template.sign_off}\nYour coach"


def _check_in(
    messages: list[dict[str, Any]], items: list[Remembered], previous: list[str], *, due: date, what: str, today: date
) -> str:
    """The check-in the app asks for: about that one intention, how it is going and one
    concrete next step for the days left, in words of its own (not a nudge's template)."""
    focus = next((item for item in items if item.summary == what), None)
    name = about(focus) if focus else lower_first(what)
    days = (due - today).days
    when = (
        "It's today"
        if days <= 0
        else "It's tomorrow"
        if days == 1
        else f"It's {_count(days, 'day')} away, on {due:%A %-d %B}"
    )
    template = _unused(CHECK_IN_TEMPLATES, previous, lambda template: template.signature)
    greeting = _unused(GREETINGS, previous, lambda greeting: greeting.split()[0] + " ").format(
        name=user_name(messages) or "there"
    )
    fields = {"focus": name, "when": when, "step": _next_step(days), "support": _support(items, focus, previous)}
    paragraph = " ".join(line for line in (line.format(**fields) for line in template.lines) if line)
    subject = capitalise(template.subject.format(**fields))
    return f"Subject: {subject}\n\n{greeting}\n\n{paragraph}\n\n{template.sign_off}\nYour coach"


def _next_step(days: int) -> str:
    if days > 14:
        return "One concrete step: put the first preparation session in your diary this week."
    if days > 3:
        return "One concrete step: pick the one thing that still needs doing and do it first."
    return "One concrete step: keep the last days light, and get a good night's sleep before."


def _focus(items: list[Remembered], previous: list[str]) -> Remembered | None:
    # The item the previous emails mentioned least, most pressing first among equals: a
    # fresh topic each time, and a fair rotation once every topic has had its turn.
    candidates = sorted((item for item in items if _is_focus(item)), key=_focus_rank)
    if not candidates:
        return None
    return min(candidates, key=lambda item: sum(mentioned_in(item, email) for email in previous))


def _support(items: list[Remembered], focus: Remembered | None, previous: list[str]) -> str:
    """A line of care for an injury or allergy, unless an earlier email already said it."""
    for item in items:
        if item.category in {"injury", "allergy"} and item != focus:
            # What the coach keeps in mind, in the person's terms: never a plan of its own.
            reworded = clause(item)
            line = f"I'm keeping in mind that {reworded}." if reworded else ""
            return "" if any(line.lower() in email for email in previous) else line
    return ""


def _is_focus(item: Remembered) -> bool:
    return is_referable(item) or item.category == "episode" or item.tier == "episodic"


def _focus_rank(item: Remembered) -> tuple[int, str]:
    # Something due comes first, then a recent episode, then the rest in the order the coach
    # would bring them up.
    if item.due_at:
        return (0, item.due_at)
    if item.category == "episode" or item.tier == "episodic":
        return (1, "")
    return (2 + referral_rank(item), "")


def _detail(item: Remembered, today: date) -> str:
    due = due_date(item)
    if due and due >= today:
        weeks = (due - today).days // 7
        when = "this week" if weeks == 0 else f"about {_count(weeks, 'week')} away"
        return f"It's {when}, so now is a good time to plan the build-up."
    if item.category == "injury":
        limit = injury_limit(item)
        return f"How has it been feeling? We'll keep {limit} out of it." if limit else "How has it been feeling?"
    if item.category == "episode" or item.tier == "episodic":
        return f"Recently: {as_sentence(clip(item.summary, QUOTE_CHARS))}"
    if item.category == "goal":
        return "Every session, even a short one, is a step towards it."
    return "Let's keep building on it."


def _unused[T](options: Sequence[T], previous: list[str], signature: Any) -> T:
    """The first option, counting on from the number of previous emails, that none of them used."""
    count = len(options)
    for step in range(count):
        option = options[(len(previous) + step) % count]
        if not any(signature(option).lower() in email for email in previous):
            return option
    return options[len(previous) % count]


def _themes(texts: list[str]) -> str:
    counts: Counter[str] = Counter()
    first_seen: dict[str, int] = {}
    for word in (word for text in texts for word in WORD.findall(text.lower())):
        if len(word) < 4 or word in STOP_WORDS or word in CHAT_WORDS or word.isdigit():
            continue
        counts[word] += 1
        first_seen.setdefault(word, len(first_seen))
    themes = sorted(counts, key=lambda word: (-counts[word], first_seen[word]))[:THEME_COUNT]
    return join_words(themes) if themes else "how things are going"


def _worth_keeping(texts: list[str], today: date, *, standing_only: bool = False) -> str:
    """Summaries of what the texts say a coach would note down; `standing_only` leaves out dated plans."""
    # What a person in crisis said is not coaching material: nothing of it is kept.
    notes = [note for text in texts if crisis_in(text) is None for note in notes_in(text, today=today)]
    notes = [note for note in notes if not standing_only or note.due_at is None]
    summaries = list(dict.fromkeys(lower_first(note.summary) for note in notes))[:THEME_COUNT]
    return "; ".join(summaries)


def _session_lines(messages: list[dict[str, Any]]) -> list[str]:
    listed = [
        SESSION_LABEL.sub("", match.group(1)).strip()
        for line in request_text(messages).splitlines()
        if (match := SESSION_LINE.match(line)) and not match.group(1).lstrip().startswith("{")
    ]
    listed = [line for line in listed if line]
    return listed or [line.text for line in conversation(messages) if line.role == "user"]


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
