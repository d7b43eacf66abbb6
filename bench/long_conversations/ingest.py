"""A LoCoMo conversation played into the app through its own services, as if speaker A had
talked to the coach session by session, at the sessions' dates.

Speaker A is the person: their turns are messages they sent (coach/services.py), speaker
B's the coach's replies (coach/claims.py: a turn claims the message, then saves its
reply). What the dataset noted about A in a session is saved by the coach during the turn
of the exchange it came from, through the tool path a model's call takes (memory/tools.py
`run_tool`), so the near-copy check, the ceiling and eviction act as in a chat turn; a
near-copy flag is answered with keep_separate, as the facts are the dataset's own, each
distinct. Each session then ends, keeps its summary, and the week's summaries become the
week's episode (memory/episodes.py). The app's clock is moved to each turn's moment, so
every row carries the date the conversation had.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone

from accounts.models import User
from bench.long_conversations.dataset import Conversation, Observation, Session, Turn
from coach.claims import reply_save, reply_stop, turn_claim
from coach.models import ChatSession, Message
from coach.services import message_post, session_end, session_start, session_summary_save
from emails.schedule import week_key
from memory.episodes import weekly_episode_save
from memory.models import SUMMARY_MAX_CHARS
from memory.tools import ToolContext, run_tool

# Between one exchange and the next within a session, and from a message to its reply.
TURN_GAP = timedelta(seconds=40)
REPLY_AFTER = timedelta(seconds=15)
KEY_WORDS = 5


@dataclass
class Ingested:
    """The person a conversation became, and where each of its turns and facts went."""

    user: User
    # A person's message (the first of an exchange) -> the dia_ids of the exchange's turns.
    exchange_turns: dict[int, tuple[str, ...]] = field(default_factory=dict)
    # Every message, the person's and the coach's -> the dia_id of its turn; and each
    # conversation -> the dia_ids of its turns (what its summary sums up).
    turn_of_message: dict[int, str] = field(default_factory=dict)
    session_turns: dict[int, set[str]] = field(default_factory=dict)
    # A memory key the coach saved -> the observation it holds.
    observation_of_key: dict[str, Observation] = field(default_factory=dict)
    saves: Counter[str] = field(default_factory=Counter)
    # Speaker B's turns before A's first in a session: a reply with no message of the
    # person's to answer, which the app has no place for.
    unstored_openings: list[str] = field(default_factory=list)
    exchanges: int = 0
    last_at: datetime | None = None
    seconds: float = 0.0


class AppClock:
    """django.utils.timezone.now, held at the moment the conversation is at: whatever the
    services stamp (created, updated, eviction's oldest-first) reads the conversation's date."""

    def __init__(self) -> None:
        self.at = timezone.now()

    @contextmanager
    def running(self) -> Iterator[AppClock]:
        real = timezone.now
        timezone.now = lambda: self.at
        try:
            yield self
        finally:
            timezone.now = real


def ingest(
    conversation: Conversation, *, index_exchanges: Callable[[int], int] | None, email: str | None = None
) -> Ingested:
    """Play the whole conversation into a new person; `index_exchanges(user_id)` (the
    look-back's indexing, when there is one) runs after each session, as its task would."""
    started = time.perf_counter()
    first = conversation.sessions[0].at
    user = User.objects.create_user(
        email or f"locomo-{conversation.name}@example.com", None, name=conversation.speaker_a, onboarded_at=first
    )
    done = Ingested(user=user)
    weeks: dict[str, list[str]] = {}
    with AppClock().running() as clock:
        for session in conversation.sessions:
            chat = _play_session(done, clock, session, conversation.speaker_a)
            clock.at = done.last_at = clock.at + timedelta(minutes=5)
            session_end(session=chat, now=clock.at)
            session_summary_save(session=chat, summary=session.summary, now=clock.at)
            week = week_key(session.at, user.time_zone)
            weeks.setdefault(week, []).append(session.summary)
            weekly_episode_save(user=user, key=week, text="\n\n".join(weeks[week]), now=clock.at)
            if index_exchanges is not None:
                index_exchanges(user.pk)
    done.seconds = time.perf_counter() - started
    return done


def exchanges_of(turns: tuple[Turn, ...], speaker_a: str) -> tuple[list[Turn], list[tuple[Turn, Turn | None]]]:
    """A session's turns as the app holds them: each of A's turns a message, with B's next
    turn as its reply (None for A's last word of a session). Returns B's opening turns,
    which precede any message of A's, apart."""
    openings: list[Turn] = []
    pairs: list[tuple[Turn, Turn | None]] = []
    for turn in turns:
        if turn.speaker == speaker_a:
            pairs.append((turn, None))
        elif pairs and pairs[-1][1] is None:
            pairs[-1] = (pairs[-1][0], turn)
        elif pairs:
            # B twice in a row (the data has none): one reply, with both turns' words.
            said, reply = pairs[-1]
            pairs[-1] = (said, Turn(reply.dia_id, reply.speaker, f"{reply.text}\n\n{turn.text}"))
        else:
            openings.append(turn)
    return openings, pairs


def _play_session(done: Ingested, clock: AppClock, session: Session, speaker_a: str) -> ChatSession:
    clock.at = session.at
    chat = session_start(user=done.user, now=clock.at)
    openings, pairs = exchanges_of(session.turns, speaker_a)
    done.unstored_openings += [turn.dia_id for turn in openings]
    noted = _observations_by_exchange(session, pairs, speaker_a)
    for number, (said, reply) in enumerate(pairs):
        clock.at = session.at + number * TURN_GAP
        message = message_post(session=chat, text=said.text, client_id=None, now=clock.at)
        done.exchange_turns[message.pk] = (said.dia_id, reply.dia_id) if reply else (said.dia_id,)
        done.turn_of_message[message.pk] = said.dia_id
        done.session_turns.setdefault(chat.pk, set()).update(done.exchange_turns[message.pk])
        done.exchanges += 1
        attempt = turn_claim(message_id=message.pk, user_id=done.user.pk, now=clock.at)
        assert attempt is not None, f"message {message.pk} could not be claimed"
        # The coach saves while it answers: in the turn, before its reply is kept.
        _coach_saves(done, chat, message, noted.get(number, []))
        if reply is not None:
            clock.at += REPLY_AFTER
            done.turn_of_message[reply_save(attempt=attempt, text=reply.text, now=clock.at).pk] = reply.dia_id
        else:
            # A's last word of the session: the person left before an answer came, as Stop
            # leaves a turn (answered, nothing said back).
            reply_stop(attempt=attempt, partial_text="", now=clock.at)
    return chat


def _observations_by_exchange(
    session: Session, pairs: list[tuple[Turn, Turn | None]], speaker_a: str
) -> dict[int, list[Observation]]:
    where = {turn.dia_id: n for n, pair in enumerate(pairs) for turn in pair if turn is not None}
    by_exchange: dict[int, list[Observation]] = {}
    for observation in session.observations:
        if observation.speaker != speaker_a or not pairs:
            continue
        found = [where[d] for d in observation.dia_ids if d in where]
        # A fact from a turn the app holds no exchange for: noted at the session's end.
        by_exchange.setdefault(found[0] if found else len(pairs) - 1, []).append(observation)
    return by_exchange


def _coach_saves(done: Ingested, chat: ChatSession, message: Message, observations: list[Observation]) -> None:
    if not observations:
        return
    user = done.user
    context = ToolContext(
        user=user, time_zone=user.time_zone, remembers=chat.remembered, session_id=chat.pk, message_id=message.pk
    )
    for observation in observations:
        arguments = _save_arguments(observation, key=_key(observation, taken=done.observation_of_key))
        result = json.loads(run_tool(context, "save_memory", json.dumps(arguments)))
        if result.get("status") == "not_saved" and result.get("duplicates"):
            done.saves["flagged as a near-copy, kept separate"] += 1
            result = json.loads(run_tool(context, "save_memory", json.dumps({**arguments, "keep_separate": True})))
        status = result.get("status", "error")
        done.saves[status] += 1
        if status == "saved":
            done.observation_of_key[result["key"]] = observation


def _save_arguments(observation: Observation, *, key: str) -> dict[str, object]:
    return {
        "key": key,
        "tier": "episodic",
        "category": "background",
        "summary": one_line(observation.text),
        "content": observation.text,
        "due_at": None,
        "keep_separate": None,
    }


def one_line(text: str) -> str:
    """A summary within the index's limit, cut at a word."""
    text = " ".join(text.split())
    return text if len(text) <= SUMMARY_MAX_CHARS else text[: SUMMARY_MAX_CHARS - 1].rsplit(" ", 1)[0] + "\u2026"


def _key(observation: Observation, *, taken: dict[str, Observation]) -> str:
    # A coach names a note by its topic: the fact's first words, made unique.
    words = re.findall(r"[a-z0-9]+", observation.text.lower())[:KEY_WORDS] or ["note"]
    base = "-".join(words)[:48].strip("-")
    n = 1
    while (key := f"{base}-{n}") in taken:
        n += 1
    return key
