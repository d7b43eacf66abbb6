"""A newcomer's walk through the app with no model key: the offline coach answers, and its
replies are what people judge the memory by.

Onboarding with an allergy, four facts told in chat, a correction, then a new
conversation with four questions that need them. Each reply is checked for the facts it
must use, the ones it must not contradict, and memory text pasted ungrammatically. Nothing
is scripted: every answer is the rule-based coach's own, through the real app.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from django.test import Client

from accounts.models import User
from coach.models import ChatSession
from coach.services import message_post, session_start
from memory.models import Memory
from offline_coach import ModelServer
from tests.coach.sse import events, session_cookie
from tests.conftest import make_user

# Memory text pasted into a sentence it does not fit: doubled pronouns, a full stop before
# a comma, or a sentence that goes on in lower case after a full stop.
UNGRAMMATICAL = re.compile(r"(?i:\b(?:your|my|their) (?:your|you|my|i|their)\b|\byou (?:you|your)\b)|\.\s*,|\.\s+[a-z]")
# As a newcomer writes it: the second fact in the first person, with its full stop.
ONBOARDING = {
    "health": "Allergic to peanuts. I had a stress fracture in my right shin in 2023.",
    "time_zone": "UTC",
}
# Each taken in without the allergy, which none of them touches.
FACTS = (
    "I'm training for a half marathon in April.",
    "I work night shifts, so I sleep during the day.",
    "I have a bad left knee.",
    "I'm giving a talk in June.",
)
CORRECTION = "Actually, my talk is in July now, not June."


@dataclass(frozen=True)
class Check:
    """What one reply must say (each group: one of its words) and must not."""

    asked: str
    uses: tuple[tuple[str, ...], ...] = ()
    never: tuple[str, ...] = ()
    pattern: str | None = None


QUESTIONS = (
    # Food: the allergy, and nothing about the knee.
    Check("What should I eat the night before a long run?", uses=(("peanut",),), never=("knee",)),
    # A plan: a Markdown list with bold day names, around the knee and the night shifts.
    Check(
        "Can you plan my training week?",
        uses=(("knee",), ("shin",), ("night shift", "shifts")),
        pattern=r"^- \*\*(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)\*\*",
    ),
    # Sleep: the night shifts, and nothing about food.
    Check("I keep sleeping badly. Any advice?", uses=(("night shift", "shifts"),), never=("peanut",)),
    # The index, grouped, with the corrected talk.
    Check(
        "What do you remember about me?",
        uses=(("peanut",), ("knee",), ("half marathon",), ("night shift",), ("july",)),
        never=("june",),
    ),
)


@pytest.fixture
def newcomer(live_app: str, client: Client) -> User:
    person = make_user("newcomer@example.com", onboarded=False)
    client.force_login(person)
    assert client.post("/welcome/", ONBOARDING).status_code == 302
    return person


def say(live_app: str, client: Client, session: ChatSession, text: str) -> str:
    """What the coach answers `text`, as the person's browser reads it off the stream."""
    message = message_post(session=session, text=text, client_id=None)
    url = f"{live_app}/chat/{session.pk}/messages/{message.pk}/reply"
    return "".join(data["text"] for name, data in events(url, cookie=session_cookie(client)) if name == "text")


def problems(check: Check, reply: str) -> list[str]:
    """What is wrong with `reply` as the answer to `check.asked`; empty when nothing is."""
    lower = reply.lower()
    found = [f"does not use {' or '.join(group)}" for group in check.uses if not any(word in lower for word in group)]
    found += [f"mentions {word}" for word in check.never if word in lower]
    if pasted := UNGRAMMATICAL.search(reply):
        found.append(f"pastes memory text ungrammatically: {pasted.group(0)!r}")
    if check.pattern and not re.search(check.pattern, reply, re.MULTILINE):
        found.append(f"has no {check.pattern!r}")
    return found


def test_a_newcomers_walk_uses_what_was_said_and_takes_the_correction(
    live_app: str, client: Client, newcomer: User, model_server: ModelServer
) -> None:
    first = session_start(user=newcomer)
    told = [(text, say(live_app, client, first, text)) for text in FACTS]
    corrected = say(live_app, client, first, CORRECTION)
    second = session_start(user=newcomer)
    answered = [(check, say(live_app, client, second, check.asked)) for check in QUESTIONS]
    print("\n".join(f"> {text}\n{reply}\n" for text, reply in [*told, (CORRECTION, corrected)]))  # noqa: T201
    print("\n".join(f"> {check.asked}\n{reply}\n" for check, reply in answered))  # noqa: T201

    failures = {check.asked: found for check, reply in answered if (found := problems(check, reply))}
    failures |= {text: found for text, reply in told if (found := problems(Check(text, never=("peanut",)), reply))}
    talks = [m.summary for m in Memory.objects.filter(user=newcomer) if "talk" in m.summary.lower()]
    if [("june" in talk.lower(), "july" in talk.lower()) for talk in talks] != [(False, True)]:
        failures[CORRECTION] = [f"the talks remembered read {talks!r}"]
    # The correction shows as the person's cue under the reply, with the talk as it now reads.
    if "Updated in memory: Giving a talk in July" not in client.get(f"/chat/{first.pk}/").content.decode():
        failures.setdefault(CORRECTION, []).append("shows no cue of the update")
    failures.setdefault(CORRECTION, []).extend(problems(Check(CORRECTION, uses=(("july",),)), corrected))
    failures = {asked: found for asked, found in failures.items() if found}
    assert not failures, "\n".join(f"{asked!r}: {'; '.join(found)}" for asked, found in failures.items())
