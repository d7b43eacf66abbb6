"""Three people the code has never seen walk through the app with no model key: the
offline coach answers every message, unscripted, through the real app over ASGI, on the
embeddings it ships (all-MiniLM-L6-v2).

Each tells a few facts in a first conversation, then in a second asks five questions that
need them and makes two corrections in words of their own (tests/coach/demo_people.py).
Every reply that needs a memory uses it, no reply after a correction says the old fact,
no sentence comes twice, and no memory text is pasted in ungrammatically.
"""

from __future__ import annotations

import re

import pytest
from django.test import Client

from accounts.models import User
from coach.models import ChatSession
from coach.services import message_post, session_start
from memory.models import Memory
from offline_coach import ModelServer
from tests.coach.demo_people import PEOPLE, Ask, Correction, Person
from tests.coach.sse import events, session_cookie
from tests.conftest import make_user

MINILM = "all-MiniLM-L6-v2"
# Memory text pasted into a sentence it does not fit: doubled pronouns, a full stop before
# a comma, a sentence that goes on in lower case after a full stop, a word said three times
# in one list ("X, X and X"), or an article before a pronoun.
UNGRAMMATICAL = re.compile(
    r"(?i:\b(?:your|my|their) (?:your|you|my|i|their)\b|\byou (?:you|your)\b|\b(?:a|an|the) (?:you|your|i|my)\b)"
    r"|\.\s*,|\.\s+[a-z]|\b(\w+(?: \w+)?), \1,? and \1\b"
)
SENTENCE = re.compile(r"[^.!?\n]+[.!?]")


@pytest.fixture
def on_minilm(settings, model_server: ModelServer) -> ModelServer:
    settings.EMBEDDING_MODEL = MINILM
    settings.MEMORY_DEDUP_THRESHOLD = settings.CALIBRATED_DEDUP_THRESHOLDS[MINILM]
    return model_server


def say(live_app: str, client: Client, session: ChatSession, text: str) -> str:
    """What the coach answers `text`, as the person's browser reads it off the stream."""
    message = message_post(session=session, text=text, client_id=None)
    url = f"{live_app}/chat/{session.pk}/messages/{message.pk}/reply"
    return "".join(data["text"] for name, data in events(url, cookie=session_cookie(client)) if name == "text")


def walk(live_app: str, client: Client, person: Person) -> tuple[User, list[tuple[str, str]]]:
    """Every message of the person's walk with the coach's reply, in order."""
    user = make_user(person.email)
    client.force_login(user)
    first = session_start(user=user)
    said = [(fact, say(live_app, client, first, fact)) for fact in person.facts]
    second = session_start(user=user)
    said += [(step.text, say(live_app, client, second, step.text)) for step in person.walk]
    return user, said


def sentences(reply: str) -> list[str]:
    return [match.group(0).strip() for match in SENTENCE.finditer(reply) if len(match.group(0).split()) > 3]


def problems(person: Person, said: list[tuple[str, str]]) -> list[str]:
    """What is wrong with the replies of a walk; empty when nothing is. A sentence may come
    again in another conversation, never in one."""
    found = []
    stale: set[str] = set()
    seen: dict[str, str] = {}
    replies = dict(said)
    for step in person.walk:
        reply = replies[step.text]
        lower = reply.lower()
        if isinstance(step, Ask):
            found += [
                f"{step.text!r}: does not use {' or '.join(g)}" for g in step.uses if not any(w in lower for w in g)
            ]
        found += [f"{step.text!r}: says the corrected {word!r}" for word in stale if word in lower]
        if isinstance(step, Correction):
            stale |= set(step.stale)
            found += [f"{step.text!r}: does not say {word!r}" for word in step.now if word not in lower]
    for index, (text, reply) in enumerate(said):
        if pasted := UNGRAMMATICAL.search(reply):
            found.append(f"{text!r}: pastes memory text ungrammatically: {pasted.group(0)!r}")
        if index == len(person.facts):
            seen.clear()
        for sentence in sentences(reply):
            if sentence in seen and seen[sentence] != text:
                found.append(f"{text!r}: repeats {sentence!r} (said to {seen[sentence]!r})")
            seen.setdefault(sentence, text)
    return found


@pytest.mark.parametrize("person", PEOPLE, ids=[person.name for person in PEOPLE])
def test_a_walk_uses_what_was_kept_and_never_says_a_corrected_fact(
    live_app: str, client: Client, on_minilm: ModelServer, person: Person
) -> None:
    user, said = walk(live_app, client, person)
    print("\n".join(f"> {text}\n{reply}\n" for text, reply in said))  # noqa: T201
    kept = " ".join(f"{m.summary} {m.content}" for m in Memory.objects.filter(user=user)).lower()
    print(kept)  # noqa: T201

    found = problems(person, said)
    for step in person.walk:
        if isinstance(step, Correction):
            found += [f"{step.text!r}: the memory still says {word!r}" for word in step.stale if word in kept]
    assert not found, "\n".join(found)
