"""Playing a persona through the real app: the chat over the ASGI app, the offline coach
over HTTP, beat's jobs, a real mailbox; and recording what the model and the person
received. `live` returns the record; `figures` turns it into the published figures."""

from __future__ import annotations

import asyncio
import random
import re
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

from django.conf import settings
from django.test import AsyncClient, override_settings

from accounts.models import User
from bench.queries import QueryCounter
from bench.simulated_life import beat
from bench.simulated_life.clock import SimulatedClock
from bench.simulated_life.mailbox import Mailbox, Received
from bench.simulated_life.persona import Fact, Persona, Step
from coach.models import ChatSession, Message
from coach.runner import wait_for_running
from coach.services import session_start
from emails.models import Email, EmailPreference
from emails.preferences import email_preference_update
from emails.unsubscribe import unsubscribe_url
from infra.tokens import estimate_tokens
from memory.context import EMAILS_HEADER
from memory.models import Category, Memory, MemoryEvent
from memory.selectors import memory_list_for_user
from offline_coach import ModelServer
from offline_coach.minilm import MODEL_NAME as MINILM

# The memory part of a system prompt: the relationship stage, how to read it, and the
# memories between their markers (memory/context.py); group 2 is the memories alone.
MEMORY_BLOCK = re.compile(r"Relationship stage:.*?<<MEMORIES (\w+)>>\n(.*?)<<END MEMORIES \1>>", re.DOTALL)
TURN_SECONDS = 60


@dataclass(frozen=True)
class Prompt:
    """A request to the model that carried the memory block: a chat turn's or an email's."""

    at: datetime
    week: int
    what: str  # "turn" or "email"
    notes: str  # the memories in the block, weekly episodes and quoted emails aside; lower case
    history: str  # the weekly episodes and the emails quoted in it; lower case
    block_tokens: int


@dataclass(frozen=True)
class Turn:
    at: datetime
    week: int
    said: str
    facts: tuple[Fact, ...]
    prompt_tokens: int  # the first request of the turn: what the app assembled
    whole_history_tokens: int  # the same turn if every message ever were sent instead
    has_block: bool
    queries: int
    written: int  # memories the coach created or changed in this turn
    answered: bool


@dataclass
class Life:
    persona: Persona
    weeks: int
    seed: int
    end: datetime
    turns: list[Turn] = field(default_factory=list)
    prompts: list[Prompt] = field(default_factory=list)
    store: list[tuple[int, int, int]] = field(default_factory=list)  # (week, memories, episodes)
    received: list[Received] = field(default_factory=list)
    emails: list[dict[str, Any]] = field(default_factory=list)  # the ledger's sent emails
    not_sent: list[dict[str, Any]] = field(default_factory=list)  # the ledger's others, with why
    memories: list[dict[str, Any]] = field(default_factory=list)  # the store at the end
    unsubscribed_at: datetime | None = None
    memory_budget: int = 0
    repeat_threshold: float = 0.0
    dedup_threshold: float = 0.0
    lead: timedelta = timedelta(0)
    wall_seconds: float = 0.0


@dataclass(frozen=True)
class Session:
    week: int
    at: datetime
    steps: tuple[Step, ...]


def sessions_of(persona: Persona, *, weeks: int, seed: int) -> list[Session]:
    """When the person chats and what they say each time: a week's messages spread in
    order over its sessions, small talk (chosen by the seed) where a session has none."""
    chooser = random.Random(seed)
    zone = ZoneInfo(persona.time_zone)
    sessions = []
    for week in range(1, weeks + 1):
        first_day = persona.start + timedelta(weeks=week - 1)
        days = sorted(first_day + timedelta(days=offset) for offset in range(7))
        days = [day for day in days if day.weekday() in persona.session_days]
        steps = persona.week(week)
        for index, day in enumerate(days):
            share = steps[index * len(steps) // len(days) : (index + 1) * len(steps) // len(days)]
            if not any(step.say for step in share):
                share = (*share, Step(say=chooser.choice(persona.small_talk)))
            jitter = chooser.randint(-persona.jitter_minutes, persona.jitter_minutes)
            local = datetime.combine(day, persona.session_at, tzinfo=zone) + timedelta(minutes=jitter)
            sessions.append(Session(week, local, share))
    return sessions


def live(persona: Persona, *, weeks: int, seed: int) -> Life:
    """Play `weeks` of the persona's life through the app; what happened, recorded."""
    started = time.perf_counter()
    zone = ZoneInfo(persona.time_zone)
    first = datetime.combine(persona.start, datetime.min.time(), tzinfo=zone)
    end = first + timedelta(weeks=weeks)
    clock = SimulatedClock(first)
    life = Life(persona=persona, weeks=weeks, seed=seed, end=end)
    queries = QueryCounter()
    with _services(clock) as (server, mailbox), clock.running(), beat.tasks_run_at_once() as run_job:
        life.memory_budget = settings.MEMORY_CONTEXT_BUDGET_TOKENS
        life.repeat_threshold = settings.EMAIL_REPEAT_THRESHOLD
        life.dedup_threshold = settings.MEMORY_DEDUP_THRESHOLD
        life.lead = timedelta(days=settings.MEMORY_PROSPECTIVE_LEAD_DAYS)
        user = _person(persona, clock)
        jobs = beat.jobs()
        history: list[str] = []
        week_ends = [first + timedelta(weeks=week) for week in range(1, weeks + 1)]

        def pass_time_until(moment: datetime) -> None:
            for when, job in beat.ticks(clock.now(), moment, jobs):
                while week_ends and week_ends[0] <= when:
                    _sample_store(life, user, len(life.store) + 1)
                    week_ends.pop(0)
                clock.move_to(when)
                run_job(job)
                _collect_email_prompts(life, server, clock, first)
            clock.move_to(moment)

        for session in sessions_of(persona, weeks=weeks, seed=seed):
            pass_time_until(session.at)
            _play_session(life, user, session, clock, server, mailbox, queries, history)
        pass_time_until(end)
        while week_ends:
            _sample_store(life, user, len(life.store) + 1)
            week_ends.pop(0)
        _record_what_is_left(life, user, mailbox)
    life.wall_seconds = time.perf_counter() - started
    return life


def _record_what_is_left(life: Life, user: User, mailbox: Mailbox) -> None:
    """What the person received, the emails not sent and why, and the store as it ends."""
    life.received = list(mailbox.received)
    life.emails = list(
        Email.objects.filter(user=user, status=Email.Status.SENT)
        .order_by("sent_at", "pk")
        .values("kind", "sent_at", "subject", "embedding", "memory_id", "period_key")
    )
    life.not_sent = list(
        Email.objects.filter(user=user)
        .exclude(status=Email.Status.SENT)
        .order_by("created_at", "pk")
        .values("kind", "status", "error", "created_at", "period_key")
    )
    life.memories = [
        {
            "pk": m.pk,
            "key": m.key,
            "category": m.category,
            "tier": m.tier,
            "summary": m.summary,
            "content": m.content,
            "due_at": m.due_at,
            "status": m.status,
            "embedding": m.embedding,
        }
        for m in Memory.objects.filter(user=user).order_by("pk")
    ]


@contextmanager
def _services(clock: SimulatedClock) -> Iterator[tuple[ModelServer, Mailbox]]:
    # Scripted mode with nothing queued: the rule-based coach answers every request, and
    # the server keeps each request's body, so the figures read what the model received.
    server = ModelServer(scripted=True, today=clock.today).start()
    mailbox = Mailbox().start()
    try:
        with override_settings(
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY="bench",
            COACH_MODEL="offline-coach",
            EMBEDDING_MODEL=MINILM,
            MEMORY_DEDUP_THRESHOLD=settings.CALIBRATED_DEDUP_THRESHOLDS[MINILM],
            MEMORY_DEDUP_FAR_THRESHOLD=settings.CALIBRATED_DEDUP_FAR_THRESHOLDS[MINILM],
            MAILERS={"default": mailbox.mailer},
            ALLOWED_HOSTS=[*settings.ALLOWED_HOSTS, "testserver"],
            # Months of messages pass in minutes of real time; the limits are for people.
            COACH_MESSAGES_PER_MINUTE=10**6,
            COACH_SESSIONS_PER_MINUTE=10**6,
            COACH_MAX_OPEN_STREAMS=10**6,
        ):
            yield server, mailbox
    finally:
        mailbox.stop()
        server.stop()


def _person(persona: Persona, clock: SimulatedClock) -> User:
    user = User.objects.create_user(
        f"lifetime-{uuid.uuid4().hex[:12]}@example.com",
        "bench-password",
        onboarded_at=clock.now(),
        time_zone=persona.time_zone,
    )
    email_preference_update(
        user=user,
        frequency=persona.email_frequency,
        session_summaries=persona.session_summaries,
        quiet_start=persona.quiet_start,
        quiet_end=persona.quiet_end,
    )
    return user


def _play_session(
    life: Life,
    user: User,
    session: Session,
    clock: SimulatedClock,
    server: ModelServer,
    mailbox: Mailbox,
    queries: QueryCounter,
    history: list[str],
) -> None:
    clock.move_to(session.at)
    chat = session_start(user=user)
    client = AsyncClient()
    # A new sign-in each time: the login of weeks ago has expired on the simulated clock.
    asyncio.run(client.aforce_login(user))
    for step in session.steps:
        if step.unsubscribe:
            _unsubscribe(life, user, client, mailbox)
        else:
            _turn(life, user, chat, session.week, step, client, clock, server, queries, history)
        clock.advance(timedelta(minutes=life.persona.minutes_between_messages))


def _turn(
    life: Life,
    user: User,
    chat: ChatSession,
    week: int,
    step: Step,
    client: AsyncClient,
    clock: SimulatedClock,
    server: ModelServer,
    queries: QueryCounter,
    history: list[str],
) -> None:
    server.reset()
    events_before = MemoryEvent.objects.filter(user=user).order_by("-pk").values_list("pk", flat=True).first() or 0
    before = queries.count
    stream_url = asyncio.run(_post(client, chat, step.say))
    # The turn runs on the app's own loop, read or not; it is over only when that work is.
    # Its reply is read after, as a reload reads it: a reader that waits on a running turn
    # asks the database what became of it each QUIET_SECONDS of real time, so the queries
    # counted would follow the machine's speed, not the persona and the seed.
    wait_for_running(timeout=120)
    answered = asyncio.run(_read(client, stream_url))
    counted = queries.count - before
    requests = server.chat_requests()
    first = requests[0] if requests else {"messages": []}
    system = ModelServer.system_prompt(first)
    block = MEMORY_BLOCK.search(system)
    reply = Message.objects.filter(session=chat, role=Message.Role.ASSISTANT).order_by("-pk").first()
    # What the turn would cost if, instead of a memory, every message ever were sent.
    fixed_system = system.replace(block.group(0), "") if block else system
    history.append(step.say)
    whole = estimate_tokens(fixed_system) + sum(estimate_tokens(text) for text in history)
    if reply is not None:
        history.append(reply.content)
    written = (
        MemoryEvent.objects.filter(user=user, pk__gt=events_before, actor=MemoryEvent.Actor.COACH)
        .filter(action__in=[MemoryEvent.Action.CREATED, MemoryEvent.Action.UPDATED])
        .count()
    )
    life.turns.append(
        Turn(
            at=clock.now(),
            week=week,
            said=step.say,
            facts=step.facts,
            prompt_tokens=estimate_tokens("\n".join(_texts(first))),
            whole_history_tokens=whole,
            has_block=block is not None,
            queries=counted,
            written=written,
            answered=answered,
        )
    )
    if block:
        life.prompts.append(Prompt(clock.now(), week, "turn", *_parts(block.group(2)), estimate_tokens(block.group(0))))
    server.reset()


async def _post(client: AsyncClient, chat: ChatSession, text: str) -> str:
    """The message sent, as the page sends it; the address of its reply's stream."""
    sent = await client.post(f"/chat/{chat.pk}/messages", {"text": text}, headers={"HX-Request": "true"})
    # The page is handed the reply's stream address, as the browser is.
    found = re.search(r'data-stream-url="([^"]+)"', sent.content.decode())
    if found is None:
        raise RuntimeError(f"the chat refused a message ({sent.status_code}): {sent.content.decode()[:300]}")
    return found.group(1)


async def _read(client: AsyncClient, stream_url: str) -> bool:
    """Whether the reply's stream ends in its answer."""
    response = await client.get(stream_url)
    body = b"".join([chunk async for chunk in response.streaming_content])
    return b"event: done" in body


def _unsubscribe(life: Life, user: User, client: AsyncClient, mailbox: Mailbox) -> None:
    """One click on the unsubscribe link of the last email they got (or the link every
    email carries, if none came yet)."""
    links = [received.unsubscribe_url for received in mailbox.received if received.unsubscribe_url]
    url = links[-1] if links else unsubscribe_url(user.pk)
    response = asyncio.run(client.post(urlsplit(url).path))
    if response.status_code != 200:
        raise RuntimeError(f"unsubscribing answered {response.status_code}")
    life.unsubscribed_at = EmailPreference.objects.get(user=user).unsubscribed_at


def _collect_email_prompts(life: Life, server: ModelServer, clock: SimulatedClock, first: datetime) -> None:
    """The memory blocks of the requests beat's jobs made (email drafts carry one)."""
    for body in server.chat_requests():
        block = MEMORY_BLOCK.search(ModelServer.system_prompt(body))
        if block:
            week = int((clock.now() - first) / timedelta(weeks=1)) + 1
            life.prompts.append(
                Prompt(clock.now(), week, "email", *_parts(block.group(2)), estimate_tokens(block.group(0)))
            )
    server.reset()


def _parts(memories: str) -> tuple[str, str]:
    """The block's memories, and apart from them what is a record of the past: the weekly
    episodes and the emails sent (a week's episode rightly names that week's schedule)."""
    notes: list[str] = []
    history: list[str] = []
    current = notes
    for line in memories.lower().splitlines():
        if line.startswith("## "):
            current = history if line in (f"## {Category.EPISODE}", EMAILS_HEADER.lower()) else notes
        current.append(line)
    return "\n".join(notes), "\n".join(history)


def _sample_store(life: Life, user: User, week: int) -> None:
    memories = memory_list_for_user(user=user)
    episodes = memories.filter(category="episode").count()
    life.store.append((week, memories.count() - episodes, episodes))


def _texts(body: dict[str, Any]) -> list[str]:
    texts = []
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return texts
