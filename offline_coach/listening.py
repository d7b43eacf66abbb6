"""A chat turn, round by round, as a model that listens takes it.

1. The person's message: a crisis is answered with care and nothing else. Otherwise the
   coach looks up what bears on it through the app's own tools: `search_memories` for each
   sentence (a few at most), and `search_conversations` when the person refers back.
2. The search results in: a sentence that contradicts a memory the search found becomes
   `update_memory` or `delete_memory` on it (`corrections`); what is new and worth keeping
   becomes `save_memory` (`statements`).
3. A save flagged as a near-copy is answered once (`flags`).
4. Words (`chat`): what changed, what bears on the message (safety notes first), one question.

Without `search_memories` offered (a client of its own, or an old prompt), it reads the
memories in the prompt instead, and takes steps 2 to 4 as they come.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import date
from typing import Any

from offline_coach.bag_of_words import words
from offline_coach.chat import GREETING, asks_for_help, chat_reply
from offline_coach.corrections import (
    SAFETY_CATEGORIES,
    Changed,
    changes_made,
    corrections_in,
    shares_a_word,
    to_the_person,
)
from offline_coach.crisis import asks_to_remember, crisis_in, crisis_reply
from offline_coach.flags import MERGE_REASON, answer_flags
from offline_coach.look_back import SEARCH as SEARCH_CONVERSATIONS
from offline_coach.look_back import answer_from, look_back_call, looked_back
from offline_coach.phrasing import clip, sentences
from offline_coach.prompt import (
    CallResult,
    Remembered,
    as_remembered,
    callable_tools,
    calls_since_user,
    earlier_replies,
    latest_round,
    remembered,
    suggested,
    text_of,
)
from offline_coach.recall import asks_what_is_remembered
from offline_coach.reply import Reply, ToolCall
from offline_coach.statements import notes_in
from offline_coach.wording import used_in
from paste_splitter import SAFETY_DOMAINS, domains_of
from paste_splitter.domains import EXERCISE, FOOD

SEARCH_MEMORIES = "search_memories"
SAVE, UPDATE, DELETE = "save_memory", "update_memory", "delete_memory"
WRITES = frozenset({SAVE, UPDATE, DELETE})
# A message of many sentences is looked up a few sentences at a time, as a model would.
MOST_SEARCHES = 4
QUERY_CHARS = 300
MOST_BROUGHT_UP = 3
GREETING_WORDS = 4
# A search's similarity from which its first result bears on the message without a shared
# word (all-MiniLM-L6-v2's scale; a search that gives none leaves the shared words to decide).
CLOSE_IN_MEANING = 0.5
# What a reply never brings up unprompted: how to coach (it shapes the words instead) and
# the record of past weeks.
NEVER_BROUGHT_UP = frozenset({"feedback", "episode"})


def chat_turn(body: dict[str, Any], messages: list[dict[str, Any]], *, today: date) -> Reply:
    """The coach's answer to a chat turn's request, in the round it has reached."""
    tools = callable_tools(body)
    last = messages[-1] if messages else {}
    text = next((text_of(m) for m in reversed(messages) if m.get("role") == "user"), "")
    calls = calls_since_user(messages)
    if kind := crisis_in(text):
        return _in_crisis(kind, text, tools, first=last.get("role") == "user", earlier=earlier_replies(messages))
    if last.get("role") == "user" and SEARCH_MEMORIES in tools and (searches := _searches(text, tools)):
        return Reply(tool_calls=searches)
    first_writes = last.get("role") in {"user", "tool"} and not any(call.name in WRITES for call in calls)
    if first_writes and (writes := _writes(text, messages, calls, today=today, tools=tools)):
        return Reply(tool_calls=writes)
    latest = latest_round(messages) if last.get("role") == "tool" else []
    if UPDATE in tools and not any(_answers_a_flag(call) for call in calls) and (answers := answer_flags(latest)):
        return Reply(tool_calls=answers)
    if (found := looked_back(calls)) is not None:
        return Reply(text=answer_from(found))
    return Reply(text=_words(text, messages, calls))


def _searches(text: str, tools: frozenset[str]) -> tuple[ToolCall, ...]:
    """A look back when the person refers to an earlier conversation, else a search of the
    memories for each sentence that says something."""
    if asks_what_is_remembered(text) or (GREETING.match(text) and len(text.split()) <= GREETING_WORDS):
        # The index answers the one; a "hello again" has nothing to look up.
        return ()
    if SEARCH_CONVERSATIONS in tools and (look := look_back_call(text)):
        # Asked about an earlier conversation: looked back first, answered from what it finds.
        return (look,)
    said = [sentence for sentence in sentences(text) if words(sentence)][:MOST_SEARCHES]
    return tuple(ToolCall(SEARCH_MEMORIES, json.dumps({"query": s[:QUERY_CHARS], "limit": None})) for s in said)


def _writes(
    text: str, messages: list[dict[str, Any]], calls: list[CallResult], *, today: date, tools: frozenset[str]
) -> tuple[ToolCall, ...]:
    """Corrections of what the searches found, and saves of what is new."""
    known = remembered(messages)
    found = _found_by_query(calls, known)
    if not any(call.name == SEARCH_MEMORIES for call in calls):
        # Nothing was searched: every memory in the prompt is a candidate for each sentence.
        found = {sentence: known for sentence in sentences(text)}
    fixes = corrections_in(text, found, today=today, tools=tools)
    saves = notes_in(fixes.rest(text), today=today) if SAVE in tools else []
    return (*fixes.calls, *(ToolCall(SAVE, json.dumps(note.arguments())) for note in saves))


def _words(text: str, messages: list[dict[str, Any]], calls: list[CallResult]) -> str:
    known = _known(messages, calls)
    changed = changes_made(calls, known)
    pending = suggested(messages)
    gone = {change.item.key for change in changed} | pending
    saved = [as_remembered(call.arguments) for call in calls if call.name == SAVE and _status(call) == "saved"]
    saved_keys = {item.key for item in saved} | {str(_result(call).get("key")) for call in calls if call.name == SAVE}
    earlier = earlier_replies(messages)
    found = [item for item in _found(calls, known) if item.key not in gone]
    standing = [item for item in known if item.key not in gone and item.key not in saved_keys]
    return chat_reply(
        user_text=text,
        bearing=brought_up(text, found=found, known=standing, earlier=earlier),
        changed=changed,
        saved=saved,
        known=_changed(known, changed, pending),
        earlier_replies=earlier,
    )


def brought_up(
    text: str, *, found: Sequence[Remembered], known: Sequence[Remembered], earlier: Sequence[str] = ()
) -> list[Remembered]:
    """What the reply brings up: the safety notes the message bears on (every one is weighed
    on a question of exercise, food, sleep or medicine), then what the search found that
    shares its words, what sets its times when it is about timing, and the search's first
    result when it is close in meaning. A memory already brought up in this conversation
    comes up again only when the message names it, or it keeps the person safe."""
    domains = domains_of(text)
    if FOOD in domains:
        # A question about food is about food, whatever it is for: "what should I eat before
        # a long run?" needs the allergy, not the knee.
        domains -= {EXERCISE}
    keys = {item.key for item in known}
    candidates = [*known, *(item for item in found if item.key not in keys)]
    rank = {item.key: index for index, item in enumerate(found)}

    def about(item: Remembered) -> frozenset[str]:
        return domains_of(f"{item.summary} {item.content}", category=item.category)

    safety = sorted(
        (
            item
            for item in candidates
            if item.category in SAFETY_CATEGORIES
            and (about(item) & domains & SAFETY_DOMAINS or shares_a_word(text, item))
        ),
        key=lambda item: rank.get(item.key, len(rank)),
    )
    worded = [item for item in found if shares_a_word(text, item)]
    close = [found[0]] if found and found[0].score is not None and found[0].score >= CLOSE_IN_MEANING else []
    asking = asks_for_help(text)
    # On a question, what shares its domain: the schedule for "when", the shifts for sleep.
    domained = [item for item in candidates if asking and domains & about(item)]
    close = [found[0]] if found and found[0].score is not None and found[0].score >= CLOSE_IN_MEANING else []
    chosen: dict[str, Remembered] = {}
    for item in [*safety, *worded, *domained, *close]:
        if item.category in NEVER_BROUGHT_UP or item.key in chosen:
            continue
        said_before = any(used_in(item, reply) for reply in earlier)
        # Once in a conversation, unless asked about again (by its words or its domain), or
        # it keeps the person safe on a question it bears on.
        asked_again = asking and (item in safety or item in domained or shares_a_word(text, item))
        if said_before and not asked_again:
            continue
        chosen[item.key] = item
    return list(chosen.values())[:MOST_BROUGHT_UP]


def _known(messages: list[dict[str, Any]], calls: list[CallResult]) -> list[Remembered]:
    """The memories in the prompt (with the notes since), and what this turn's searches found besides."""
    known = {item.key: item for item in remembered(messages)}
    for item in _found(calls, list(known.values())):
        known.setdefault(item.key, item)
    return list(known.values())


def _changed(known: list[Remembered], changed: Sequence[Changed], pending: frozenset[str]) -> list[Remembered]:
    """What is remembered once this turn's changes are made; a memory waiting on the person's
    word left out, so its old fact is not said meanwhile."""
    deleted = {change.item.key for change in changed if change.action == "deleted"}
    now = {change.item.key: change.item for change in changed if change.action == "updated"}
    return [
        replace(item, summary=now[item.key].summary, content="") if item.key in now else item
        for item in known
        if item.key not in deleted | pending
    ]


def _found(calls: list[CallResult], known: Sequence[Remembered]) -> list[Remembered]:
    """Every memory this turn's searches found, once each, in the order the searches ranked them."""
    seen: dict[str, Remembered] = {}
    for items in _found_by_query(calls, known).values():
        for item in items:
            seen.setdefault(item.key, item)
    return list(seen.values())


def _found_by_query(calls: list[CallResult], known: Sequence[Remembered]) -> dict[str, list[Remembered]]:
    """What each search found, by its query, each memory with its full note where the prompt has it."""
    notes = {item.key: item for item in known}
    found: dict[str, list[Remembered]] = {}
    for call in calls:
        result = _result(call)
        if call.name != SEARCH_MEMORIES or result.get("status") != "found":
            continue
        items = [as_remembered(m) for m in result.get("memories") or [] if isinstance(m, dict)]
        found[str(call.arguments.get("query"))] = [
            replace(notes[item.key], score=item.score) if item.key in notes else item for item in items if item.key
        ]
    return found


def _in_crisis(kind: str, text: str, tools: frozenset[str], *, first: bool, earlier: Sequence[str]) -> Reply:
    """Care and where to find help; a note of it only when the person asks for one."""
    if first and SAVE in tools and asks_to_remember(text):
        summary = clip(to_the_person(sentences(text)[0].rstrip(" .!")))
        note = {
            "key": "safety-note",
            "tier": "profile",
            "category": "safety",
            "summary": summary,
            "content": f"{summary}.",
            "due_at": None,
            "keep_separate": None,
        }
        return Reply(tool_calls=(ToolCall(SAVE, json.dumps(note)),))
    return Reply(text=crisis_reply(kind, earlier))


def _answers_a_flag(call: CallResult) -> bool:
    return (call.name == SAVE and call.arguments.get("keep_separate") is True) or (
        call.name == UPDATE and call.arguments.get("reason") == MERGE_REASON
    )


def _status(call: CallResult) -> str | None:
    status = _result(call).get("status")
    return status if isinstance(status, str) else None


def _result(call: CallResult) -> dict[str, Any]:
    return call.result if isinstance(call.result, dict) else {}
