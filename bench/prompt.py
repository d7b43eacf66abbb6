"""A conversation's prompt as the model server receives it, turn by turn: how much of each
request repeats the one before it from the start (what a provider's prompt cache reads
again instead of the model), the rebuilds and why, what 1,000 turns cost, and the app's own
CPU per turn against its floor.

    bin/bench prompt [--memories 40] [--full-price 0.15] [--cached-price 0.075]

The scenario: a person (9:00 in Sydney) with `--memories` memories and an intention due in a
day and a half talks for 20 turns, two minutes apart; the coach saves on 5 of them, the
person corrects one memory on their page before turn 11, and the intention falls within
the look-ahead at turn 15. Then the next day's first turn, and a new conversation's.
Tokens are the offline coach's (words and punctuation), the tool schemas first, as a
provider renders them; "repeated" is the longest stretch from the start shared with the
previous request.

A benchmark, not a test: it prints tables.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.setup import django_for_benchmarks

django_for_benchmarks()

from django.conf import settings  # noqa: E402
from django.test import AsyncClient, override_settings  # noqa: E402
from django.utils import timezone  # noqa: E402
from openai import OpenAI  # noqa: E402

from accounts.models import User  # noqa: E402
from bench.chat import REPLY, one_turn, person  # noqa: E402
from bench.queries import QueryCounter  # noqa: E402
from bench.request_parts import composition  # noqa: E402
from coach.models import ChatSession  # noqa: E402
from coach.services import session_start  # noqa: E402
from memory.drafts import MemoryDraft  # noqa: E402
from memory.models import Memory  # noqa: E402
from memory.services import memory_edit_by_user, memory_save  # noqa: E402
from offline_coach import ModelServer  # noqa: E402
from offline_coach.wire import TOKEN  # noqa: E402

TURNS, EDIT_BEFORE, ZONE = 20, 11, "Australia/Sydney"
TURN_GAP = timedelta(minutes=2)
# OpenAI's automatic caching: prefixes from 1,024 tokens, in steps of 128.
CACHE_FROM, CACHE_STEP = 1024, 128


class BenchClock:
    """The app's clock, moved on by the scenario: each turn two minutes after the last."""

    def __init__(self, start: datetime) -> None:
        self.offset = start - datetime.now(start.tzinfo)
        self._real = timezone.now
        timezone.now = lambda: self._real() + self.offset

    def forward(self, by: timedelta) -> None:
        self.offset += by


@dataclass
class Turn:
    prompt: int
    repeated: int
    cached: int | None
    rebuilt: str
    queries: int
    model_calls: int
    body: dict[str, Any] = field(repr=False)

    @property
    def notes(self) -> list[str]:
        return [m["content"] for m in self.body["messages"][1:] if m["role"] == "system"]


def request_tokens(body: dict[str, Any]) -> list[str]:
    """The request as a prefix-caching server reads it: tool schemas, then the messages."""
    tools = TOKEN.findall(json.dumps(body.get("tools") or [], sort_keys=True))
    return tools + [token for message in body["messages"] for token in TOKEN.findall(message.get("content") or "")]


def shared_start(one: list[str], other: list[str]) -> int:
    shared = 0
    for mine, theirs in zip(one, other, strict=False):
        if mine != theirs:
            break
        shared += 1
    return shared


def cacheable(repeated: int) -> int:
    return 0 if repeated < CACHE_FROM else repeated - repeated % CACHE_STEP


FACTS = {
    3: ("evening-runs", "Runs in the evening after work, three times a week"),
    6: ("sleep-routine", "Sleeps better with the phone left in the kitchen"),
    9: ("sunday-yoga", "Wants to try yoga on Sunday mornings"),
    15: ("sister-visit", "Her sister visits for a week in August"),
    18: ("new-shoes", "Bought trail shoes for the hill route"),
}


def save(n: int) -> dict[str, Any]:
    key, summary = FACTS[n]
    return {
        "key": key,
        "tier": "episodic",
        "category": "habit",
        "summary": summary,
        "content": summary + ".",
        "due_at": None,
        "keep_separate": None,
    }


class Scenario:
    def __init__(self, server: ModelServer, queries: QueryCounter, memories: int, tag: str) -> None:
        self.server, self.queries = server, queries
        self.user = person(f"bench-prompt-{tag}@example.com", memories)
        User.objects.filter(pk=self.user.pk).update(time_zone=ZONE)
        self.user.refresh_from_db()
        self.client = AsyncClient()
        asyncio.run(self.client.aforce_login(self.user))
        self.previous: list[str] = []

    def turn(self, session: ChatSession, number: int, queue: Callable[[], None]) -> Turn:
        queue()
        builds, asked = _builds(session), len(self.server.chat_requests())
        counted = self.queries.count
        asyncio.run(one_turn(self.client, session, number))
        queries = self.queries.count - counted
        bodies = self.server.chat_requests()[asked:]
        tokens = request_tokens(bodies[0])
        repeated = shared_start(tokens, self.previous)
        self.previous = tokens
        reply = session.messages.filter(role="assistant").order_by("-pk").first()
        after, system_changed = _builds(session), _new_system(bodies)
        return Turn(
            prompt=len(tokens),
            repeated=repeated,
            cached=getattr(reply, "cached_prompt_tokens", None),
            rebuilt=after[1] if after[0] != builds[0] else ("(system prompt changed)" if system_changed else ""),
            queries=queries,
            model_calls=len(bodies),
            body=bodies[0],
        )


def _builds(session: ChatSession) -> tuple[int, str]:
    """How often the conversation's prompt was assembled, and why last (where it keeps one)."""
    fresh = ChatSession.objects.get(pk=session.pk)
    return getattr(fresh, "prompt_builds", 0), getattr(fresh, "prompt_built_because", "")


_systems: list[str] = []


def _new_system(bodies: list[dict[str, Any]]) -> bool:
    system = bodies[0]["messages"][0]["content"]
    changed = bool(_systems) and _systems[-1] != system
    _systems.append(system)
    return changed


def run_conversation(server: ModelServer, queries: QueryCounter, memories: int) -> dict[str, Any]:
    local_nine = datetime.now(ZoneInfo(ZONE)).replace(hour=9, minute=0, second=0, microsecond=0)
    clock = BenchClock(local_nine + timedelta(days=1))
    scenario = Scenario(server, queries, memories, f"{memories}")
    lead = timedelta(days=settings.MEMORY_PROSPECTIVE_LEAD_DAYS)
    intention = MemoryDraft(
        key="talk-rehearsal",
        tier="prospective",
        category="goal",
        summary="Rehearse the June talk with the club",
        content="Rehearse the June talk with the club once the slides are done.",
        due_at=timezone.now() + lead + 14 * TURN_GAP,
    )
    memory_save(user=scenario.user, draft=intention, source="coach", actor="coach")
    session = session_start(user=scenario.user)
    turns = []
    _systems.clear()
    for number in range(1, TURNS + 1):
        corrected = Memory.objects.filter(user=scenario.user).exclude(tier="prospective").order_by("pk").first()
        if number == EDIT_BEFORE and corrected is not None:
            draft = MemoryDraft(
                key=corrected.key,
                tier=corrected.tier,
                category=corrected.category,
                summary="Runs three times a week now, not five",
                content="Runs three times a week now, not five.",
            )
            memory_edit_by_user(user=scenario.user, memory_id=corrected.pk, draft=draft)
        queue = (
            (lambda n=number: server.queue_tool_calls([("save_memory", save(n))], text=REPLY))
            if (number in FACTS)
            else (lambda: server.queue_text(REPLY))
        )
        turns.append(scenario.turn(session, number, queue))
        clock.forward(TURN_GAP)
    clock.forward(timedelta(days=1) - TURNS * TURN_GAP)
    next_day = scenario.turn(session, TURNS + 1, lambda: server.queue_text(REPLY))
    new_conversation = scenario.turn(session_start(user=scenario.user), 1, lambda: server.queue_text(REPLY))
    timezone.now = clock._real
    return {"turns": turns, "next_day": next_day, "new_conversation": new_conversation}


def cpu_against_floor(server: ModelServer, memories: int, rounds: int) -> tuple[float, float]:
    """CPU of this process (every thread: the app, its steps, the scripted server) per turn,
    and per floor: two bare requests through the middleware and the same completion the
    turn asked for, streamed through the SDK from the same server (so the server's own
    reading of the prompt is on both sides). Alternated, so both see the same machine."""
    user = person(f"bench-floor-{memories}@example.com", memories)
    session = session_start(user=user)
    client = AsyncClient()
    asyncio.run(client.aforce_login(user))
    sdk = OpenAI(base_url=server.base_url, api_key="bench")

    async def bare_requests() -> None:
        for _ in range(2):
            await client.get("/livez")

    def streamed(body: dict[str, Any]) -> None:
        for _ in sdk.chat.completions.create(**{**body, "stream": True}):
            pass

    turns, floors = [], []
    for number in range(rounds):
        server.queue_text(REPLY)
        started = time.process_time()
        asyncio.run(one_turn(client, session, number))
        turns.append(time.process_time() - started)
        body = server.chat_requests()[-1]
        server.queue_text(REPLY)
        started = time.process_time()
        asyncio.run(bare_requests())
        streamed(body)
        floors.append(time.process_time() - started)
    return statistics.median(turns) * 1000, statistics.median(floors) * 1000


def cost_of_thousand(turns: list[Turn], full: float, cached: float) -> tuple[float, float]:
    """Dollars for 1,000 turns like these at the prices per million input tokens, with no
    cache and with OpenAI's (the repeated prefix, from 1,024 tokens in steps of 128)."""
    scale = 1000 / len(turns) / 1e6
    uncached = sum(t.prompt for t in turns) * full * scale
    with_cache = sum((t.prompt - cacheable(t.repeated)) * full + cacheable(t.repeated) * cached for t in turns)
    return uncached, with_cache * scale


def print_turns(result: dict[str, Any], memories: int) -> None:
    print(
        f"\n| turn ({memories} memories) | prompt tokens | repeated from the start | share | cached (server says) "
        "| rebuilt because | notes | queries | model calls |"
    )
    print("|---:|---:|---:|---:|---:|---|---:|---:|---:|")
    rows = [(str(n), t) for n, t in enumerate(result["turns"], start=1)]
    rows += [("next day", result["next_day"]), ("new conversation", result["new_conversation"])]
    for name, t in rows:
        cached = "-" if t.cached is None else f"{t.cached:,}"
        print(
            f"| {name} | {t.prompt:,} | {t.repeated:,} | {share(t):.1%} | {cached} | {t.rebuilt} "
            f"| {len(t.notes)}{' (one: now due)' if any('is now due' in n for n in t.notes) else ''} "
            f"| {t.queries} | {t.model_calls} |"
        )


def share(t: Turn) -> float:
    return t.repeated / t.prompt if t.prompt else 0.0


def summary(result: dict[str, Any]) -> dict[str, Any]:
    later = result["turns"][1:]
    kept = [t for t in later if not t.rebuilt]
    return {
        "all p50": statistics.median(share(t) for t in later),
        "p50": statistics.median(share(t) for t in kept) if kept else 0.0,
        "min": min((share(t) for t in kept), default=0.0),
        "rebuilds": [t.rebuilt for t in later if t.rebuilt],
        "saving calls": sorted({t.model_calls for n, t in enumerate(result["turns"], 1) if n in FACTS}),
        "queries": statistics.median(t.queries for t in result["turns"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=40, help="the person's memories for the turn-by-turn table")
    parser.add_argument("--full-price", type=float, default=0.15, help="dollars per million input tokens")
    parser.add_argument("--cached-price", type=float, default=0.075, help="dollars per million cached input tokens")
    parser.add_argument("--cpu-rounds", type=int, default=40)
    args = parser.parse_args()

    server = ModelServer(scripted=True).start()
    settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY = server.base_url, "bench"
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    settings.DEBUG = False
    settings.COACH_MESSAGES_PER_MINUTE = settings.COACH_MAX_OPEN_STREAMS = 10**6
    queries = QueryCounter()
    with override_settings(EMBEDDING_MODEL="bag-of-words"):
        results = {n: run_conversation(server, queries, n) for n in sorted({0, 10, 74, args.memories})}
    turn_cpu, floor_cpu = cpu_against_floor(server, args.memories, args.cpu_rounds)
    server.stop()

    print_turns(results[args.memories], args.memories)
    print(
        "\n| memories | repeated, p50 of turns 2-20 | p50 of those not rebuilt | min | rebuilds (turns 2-20) "
        "| next day | new conversation repeats | queries a turn, p50 | model calls a saving turn |"
    )
    print("|---:|---:|---:|---:|---|---|---:|---:|---|")
    for n, result in results.items():
        s = summary(result)
        rebuilds = f"{len(s['rebuilds'])}: {', '.join(sorted(set(s['rebuilds'])))}" if s["rebuilds"] else "none"
        print(
            f"| {n} | {s['all p50']:.1%} | {s['p50']:.1%} | {s['min']:.1%} | {rebuilds} "
            f"| {result['next_day'].rebuilt or 'kept'} | {result['new_conversation'].repeated:,} "
            f"| {s['queries']:g} | {s['saving calls']} |"
        )
    print("(targets: p50 >= 95%, min >= 90% on turns that are not rebuilds; one rebuild, for the edit;")
    print(" a new conversation repeats >= 1,500 tokens; <= 6 queries a turn; 1 model call a saving turn)")
    print(f"\n| where the last turn's tokens come from | {' | '.join(str(n) for n in results)} |")
    print("|---|" + "---:|" * len(results))
    parts = {n: composition(result["turns"][-1].body) for n, result in results.items()}
    for part in parts[args.memories]:
        print(f"| {part} | {' | '.join(f'{parts[n][part]:,}' for n in results)} |")
    uncached, cached = cost_of_thousand(results[args.memories]["turns"], args.full_price, args.cached_price)
    print(
        f"\n1,000 such turns at ${args.full_price}/M input tokens (${args.cached_price}/M cached): "
        f"${uncached:.2f} with no cache, ${cached:.2f} with the provider's cache ({cached / uncached:.0%})"
    )
    print(
        f"CPU a turn {turn_cpu:.1f} ms against its floor {floor_cpu:.1f} ms (two bare requests through the "
        f"middleware and one streamed completion): {turn_cpu / floor_cpu:.2f}x (target <= 2x)"
    )


if __name__ == "__main__":
    main()
