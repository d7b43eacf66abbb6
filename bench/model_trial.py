"""The coach's instructions and tools tried with a model: a few people of our own talk to the
real app (their messages posted and their replies streamed through the chat's own views),
against any OpenAI-compatible server, and everything the model was sent and did is printed.

    bin/bench model_trial --base-url URL [--model NAME] [--api-key KEY]
        [--embedding-base-url URL] [--embedding-model NAME] [--people Priya,Tomás] [--wait 900]

For each turn: what the person said; each round the model was asked (the request's tokens
by part: tools, instructions, memory block, notes, history) with the tool calls it made and
the results it got; the reply; what changed in memory. Each conversation ends and is
summarised before the next begins, as an idle one would be. At the end, a table a person:
turns, requests, tool calls by name, saves refused (and whether the same save came again),
searches for what the memory block already held, suggestions, tokens per turn and per
memory in the block.

Where no capable model is served, any OpenAI-compatible server whose replies are written
by hand (a person, or another model answering each request from the request alone) can
play the model: the waits are long (`--wait`). A benchmark, not a test: what the replies
are worth is for whoever reads the transcript to judge.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.recording_proxy import RecordingProxy


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"), help="the chat server's /v1 URL")
    parser.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY") or "none")
    parser.add_argument("--model", default=os.environ.get("COACH_MODEL") or "gpt-4.1-mini")
    parser.add_argument("--embedding-base-url", default=os.environ.get("EMBEDDING_BASE_URL"))
    parser.add_argument("--embedding-model", default=os.environ.get("EMBEDDING_MODEL") or "text-embedding-3-small")
    parser.add_argument("--people", default="", help="names, comma-separated (all of them when empty)")
    parser.add_argument("--wait", type=float, default=120.0, help="seconds to wait for each model answer")
    arguments = parser.parse_args()
    if not arguments.base_url:
        parser.error("--base-url (or OPENAI_BASE_URL) is needed: the server that plays the model")
    return arguments


ARGUMENTS = _arguments()
PROXY = RecordingProxy(ARGUMENTS.base_url).start()
os.environ |= {
    "OPENAI_BASE_URL": PROXY.base_url,
    "OPENAI_API_KEY": ARGUMENTS.api_key,
    "COACH_MODEL": ARGUMENTS.model,
    "EMBEDDING_MODEL": ARGUMENTS.embedding_model,
    "LLM_TIMEOUT_SECONDS": str(ARGUMENTS.wait),
    "LLM_MAX_RETRIES": "0",
    "COACH_FIRST_WORDS_SECONDS": str(int(ARGUMENTS.wait)),
    "COACH_TURN_DEADLINE_SECONDS": str(int(ARGUMENTS.wait * 6)),
}
if ARGUMENTS.embedding_base_url:
    os.environ["EMBEDDING_BASE_URL"] = ARGUMENTS.embedding_base_url

from bench.setup import django_for_benchmarks  # noqa: E402

django_for_benchmarks()

from django.conf import settings  # noqa: E402
from django.test import AsyncClient  # noqa: E402
from django.utils import timezone  # noqa: E402

from accounts.models import User  # noqa: E402
from bench.model_trial_people import PEOPLE, TrialPerson  # noqa: E402
from bench.request_parts import composition, count, is_note  # noqa: E402
from coach.models import ChatSession, Message  # noqa: E402
from coach.services import session_end, session_start, summaries_due  # noqa: E402
from coach.tasks import summarise_session  # noqa: E402
from memory.models import Memory, MemoryProposal  # noqa: E402

STREAM_URL = re.compile(r'data-stream-url="([^"]+)"')


def main() -> None:
    wanted = {name.strip().lower() for name in ARGUMENTS.people.split(",") if name.strip()}
    people = [p for p in PEOPLE if not wanted or p.name.lower() in wanted]
    # The chat's own views answer the test client's host, as in the other benchmarks.
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    print(f"# The coach with {ARGUMENTS.model} at {ARGUMENTS.base_url}\n")
    tallies = [asyncio.run(_talk(person)) for person in people]
    _print_table(tallies)
    PROXY.stop()


async def _talk(person: TrialPerson) -> dict[str, Any]:
    user = await User.objects.acreate(email=person.email, name=person.name, time_zone=person.time_zone)
    await User.objects.filter(pk=user.pk).aupdate(onboarded_at=timezone.now())
    client = AsyncClient()
    await client.aforce_login(user)
    tally: dict[str, Any] = {"name": person.name, "turns": 0, "requests": 0, "calls": Counter(), "tokens": 0}
    tally |= {"refused": 0, "refused_again": 0, "needless_searches": 0, "block_per_memory": []}
    for number, messages in enumerate(person.conversations, start=1):
        session = await asyncio.to_thread(session_start, user=user)
        for turn, text in enumerate(messages, start=1):
            print(f"## {person.name}, conversation {number}, turn {turn}\n\n> {text}\n")
            await _turn(client, user, session, text, tally)
        await asyncio.to_thread(_summarised, session)
    return tally


async def _turn(client: AsyncClient, user: User, session: ChatSession, text: str, tally: dict[str, Any]) -> None:
    before = await asyncio.to_thread(_memories, user)
    seen = len(PROXY)
    sent = await client.post(f"/chat/{session.pk}/messages", {"text": text}, headers={"HX-Request": "true"})
    found = STREAM_URL.search(sent.content.decode())
    if found is None:
        print(f"(the message was refused: {sent.status_code})\n")
        return
    stream = await client.get(found.group(1))
    async for _ in stream.streaming_content:
        pass
    requests = PROXY.chat_requests_since(seen)
    for number, body in enumerate(requests, start=1):
        parts = composition(body)
        print(f"request {number}: {sum(parts.values()):,} tokens ({', '.join(f'{k} {v:,}' for k, v in parts.items())})")
        tally["tokens"] += sum(parts.values())
        _print_rounds(body, tally)
    tally["requests"] += len(requests)
    tally["turns"] += 1
    if requests:
        block = composition(requests[0])["memory block"]
        kept = await Memory.objects.filter(user=user).acount()
        if kept:
            tally["block_per_memory"].append(block / kept)
    reply = await Message.objects.filter(session=session, role="assistant").order_by("-pk").afirst()
    print(f"\n**Coach:** {reply.content if reply else '(no reply)'}\n")
    after = await asyncio.to_thread(_memories, user)
    _print_changes(before, after)
    proposals = await MemoryProposal.objects.filter(user=user, status="pending").acount()
    if proposals:
        print(f"(suggestions waiting for the person: {proposals})\n")


def _print_rounds(body: dict[str, Any], tally: dict[str, Any]) -> None:
    """The tool calls of the round before this request, with their results, as this
    request carries them (the app's own notes left out)."""
    messages = body["messages"]
    last_person = max(i for i, m in enumerate(messages) if m["role"] == "user")
    rounds = [m for m in messages[last_person + 1 :] if not is_note(m)]
    results = {m.get("tool_call_id"): m.get("content") for m in rounds if m["role"] == "tool"}
    block = messages[0]["content"]
    for message in rounds:
        for call in message.get("tool_calls") or []:
            if call in tally.setdefault("counted", []):
                continue
            tally["counted"].append(call)
            name, arguments = call["function"]["name"], call["function"]["arguments"]
            result = results.get(call["id"], "")
            tally["calls"][name] += 1
            print(f"  - {name}({arguments})\n    -> {result}")
            status = _status(result)
            if status == "not_saved":
                tally["refused"] += 1
                tally.setdefault("refused_saves", []).append(arguments)
            elif name == "save_memory" and arguments in tally.get("refused_saves", []):
                tally["refused_again"] += 1
            if name == "search_memories" and _keys_found(result) and all(k in block for k in _keys_found(result)):
                tally["needless_searches"] += 1


def _status(result: str) -> str:
    try:
        return str(json.loads(result).get("status", ""))
    except (ValueError, AttributeError):
        return ""


def _keys_found(result: str) -> list[str]:
    try:
        found = json.loads(result).get("memories") or json.loads(result).get("results") or []
    except (ValueError, AttributeError):
        return []
    return [str(item.get("key")) for item in found if isinstance(item, dict) and item.get("key")]


def _memories(user: User) -> dict[int, tuple[str, str, str, str]]:
    return {m.pk: (m.key, m.category, m.source, m.summary) for m in Memory.objects.filter(user=user)}


def _print_changes(before: dict[int, tuple[str, ...]], after: dict[int, tuple[str, ...]]) -> None:
    lines = [f"  + {after[pk][0]} [{after[pk][1]}, {after[pk][2]}]: {after[pk][3]}" for pk in after if pk not in before]
    lines += [f"  ~ {after[pk][0]}: {after[pk][3]}" for pk in after if pk in before and after[pk] != before[pk]]
    lines += [f"  - {before[pk][0]}: {before[pk][3]}" for pk in before if pk not in after]
    if lines:
        print("memory:\n" + "\n".join(lines) + "\n")


def _summarised(session: ChatSession) -> None:
    """End the conversation as an idle one ends, and have it summarised."""
    seen = len(PROXY)
    session_end(session=session)
    if session.pk in summaries_due():
        summarise_session.apply(args=[session.pk])
    session.refresh_from_db()
    requests = PROXY.chat_requests_since(seen)
    asked = sum(sum(composition_of_summary(body).values()) for body in requests)
    print(f"### The conversation ends: summary asked for in {asked:,} tokens\n\n{session.summary or '(none)'}\n")


def composition_of_summary(body: dict[str, Any]) -> dict[str, int]:
    return {m["role"]: count(m.get("content") or "") for m in body["messages"]}


def _print_table(tallies: list[dict[str, Any]]) -> None:
    print(
        "| person | turns | requests | tool calls | saves refused (again) | needless searches | tokens a turn | "
        "block tokens a memory |"
    )
    print("|---|---:|---:|---|---:|---:|---:|---:|")
    for t in tallies:
        calls = ", ".join(f"{name} {n}" for name, n in sorted(t["calls"].items())) or "none"
        per_memory = sum(t["block_per_memory"]) / len(t["block_per_memory"]) if t["block_per_memory"] else 0
        print(
            f"| {t['name']} | {t['turns']} | {t['requests']} | {calls} | {t['refused']} ({t['refused_again']}) | "
            f"{t['needless_searches']} | {t['tokens'] // max(1, t['turns']):,} | {per_memory:.1f} |"
        )


if __name__ == "__main__":
    main()
