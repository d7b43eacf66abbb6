"""What reached the coach for each question: is one of its evidence turns (or the fact noted
from it) in the prompt the coach would get with the question as the person's latest
message, among the 5 of one `search_memories` call, among what one `search_conversations`
call returns (its lines, or a summary of the conversation the turn was in)? Each question
is asked in the person's own voice ("When did I go...?", the dataset's name of the person
turned into the first person), and the two searches again in the dataset's words ("When
did Caroline go...?"), so both forms are printed. Beside them, in the same run, the
baselines: a store that keeps every observation and returns the top 5 by the same
embeddings; and the look-back's variants side by side.

The prompt is the app's own: the question is posted in a new conversation the day after
the last session and the turn is begun as a chat turn begins it (coach/claims.py
`turn_begin`, which assembles the prompt), so the memory block is exactly what a model
would read. The searches go through the tool path a model's call takes.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from accounts.models import User
from bench.long_conversations.baselines import TOP, Baseline, baselines
from bench.long_conversations.dataset import Conversation, Observation, Question, in_persons_voice
from bench.long_conversations.ingest import AppClock, Ingested
from bench.long_conversations.look_back import PERSON, VARIANTS, FoundExchange, LookBack
from coach.claims import reply_stop, turn_begin
from coach.services import message_post, session_delete, session_start
from infra.tokens import estimate_tokens
from memory.selectors import memory_list_for_user
from memory.tools import ToolContext, run_tool

ASKED_AFTER = timedelta(days=1)


@dataclass
class Asked:
    question: Question
    in_prompt: bool
    in_memories: bool
    # None: the look-back is not on this branch.
    in_conversations: bool | None
    # The baselines: top 5 over every observation; some evidence turn has an observation.
    top_all: bool
    noted: bool
    # The look-back's own index with the summaries left out (None: no look-back), and how
    # many of the look-back's results were conversations' summaries.
    exchanges_alone: bool | None
    summaries_found: int
    prompt_tokens: int
    memory_tokens: int
    seconds: dict[str, float] = field(default_factory=dict)
    embeddings: dict[str, int] = field(default_factory=dict)
    # A summary the look-back returned is of a conversation an evidence turn was in.
    through_summary: bool = False
    # The look-back's result, in tokens; the question as the dataset words it, and the two
    # searches asked so; and each variant of the look-back: (evidence found, tokens).
    look_back_tokens: int = 0
    as_written: str = ""
    in_memories_as_written: bool = False
    in_conversations_as_written: bool | None = None
    variants: dict[str, tuple[bool, int]] = field(default_factory=dict)

    @property
    def reached(self) -> bool:
        return self.in_prompt or self.in_memories or bool(self.in_conversations) or self.through_summary

    @property
    def reached_as_written(self) -> bool:
        return self.in_prompt or self.in_memories_as_written or bool(self.in_conversations_as_written)

    @property
    def reached_today(self) -> bool:
        return self.in_prompt or self.in_memories


@dataclass(frozen=True)
class Probe:
    """What the measurement reads the app with: the look-back, and a count of the
    embedding requests the model server has had so far."""

    look_back: LookBack
    embedding_requests: Callable[[], int]


def ask(conversation: Conversation, done: Ingested, questions: Sequence[Question], probe: Probe) -> list[Asked]:
    """Each question asked of the app, in turn, and of the baseline store."""
    noted_memory = _observations_by_memory(done)
    base = baselines(conversation, done, questions, exchanges=probe.look_back.available)
    asked = []
    with AppClock().running() as clock:
        clock.at = (done.last_at or conversation.sessions[-1].at) + ASKED_AFTER
        for question, baseline in zip(questions, base, strict=True):
            asked.append(_ask_one(conversation, done, question, noted_memory, probe, baseline=baseline))
    noted = {d for o in conversation.observations_of(conversation.speaker_a) for d in o.dia_ids}
    for one in asked:
        one.noted = bool(noted & set(one.question.evidence))
    return asked


def _ask_one(
    conversation: Conversation,
    done: Ingested,
    question: Question,
    noted_memory: dict[int, Observation],
    probe: Probe,
    *,
    baseline: Baseline,
) -> Asked:
    evidence, kept = set(question.evidence), done.observation_of_key
    voiced = in_persons_voice(question.text, conversation.speaker_a, conversation.speaker_b)
    timing: dict[str, float] = {}
    embeds: dict[str, int] = {}

    def measured[T](name: str, step: Callable[[], T]) -> T:
        before, started = probe.embedding_requests(), time.perf_counter()
        result = step()
        timing[name], embeds[name] = time.perf_counter() - started, probe.embedding_requests() - before
        return result

    chat, prompt_ids, prompt_tokens, memory_tokens = measured("prompt", lambda: _prompt(done.user, voiced))
    keys = measured("search_memories", lambda: _memories_found(done.user, chat, voiced))
    keys_as_written = _memories_found(done.user, chat, question.text)
    in_conversations = in_as_written = None
    summaries, through_summary, tokens = 0, False, 0
    variants: dict[str, tuple[bool, int]] = {}
    look = probe.look_back
    if look.search is not None:
        if look.measure is not None:
            searched = measured("search_conversations", lambda: look.measure(done.user, voiced, None, chat))
            found, tokens = searched.found, searched.tokens
            as_written = look.measure(done.user, question.text, None, chat).found
            for variant in VARIANTS:
                tried = look.measure(done.user, voiced, variant, chat)
                variants[variant.name] = (_evidence_shown(done, tried.found, evidence), tried.tokens)
        else:
            found = measured("search_conversations", lambda: look.search(done.user, voiced, TOP, chat))
            as_written = look.search(done.user, question.text, TOP, chat)
        in_conversations = _evidence_shown(done, found, evidence)
        in_as_written = _evidence_shown(done, as_written, evidence)
        summaries = sum(x.message_id is None for x in found)
        through_summary = any(
            x.message_id is None and evidence & done.session_turns.get(x.session_id or 0, set()) for x in found
        )
    # The probe's conversation is the benchmark's, not the person's: deleted as the person
    # deletes one, so no later question or look-back sees it.
    session_delete(user=done.user, session_id=chat)
    return Asked(
        question=question,
        in_prompt=any(evidence & set(noted_memory[m].dia_ids) for m in prompt_ids if m in noted_memory),
        in_memories=any(evidence & set(kept[k].dia_ids) for k in keys if k in kept),
        in_conversations=in_conversations,
        top_all=baseline.top_all,
        exchanges_alone=baseline.exchanges_alone,
        summaries_found=summaries,
        noted=False,
        prompt_tokens=prompt_tokens,
        memory_tokens=memory_tokens,
        seconds=timing,
        embeddings=embeds,
        through_summary=through_summary,
        look_back_tokens=tokens,
        as_written=question.text,
        in_memories_as_written=any(evidence & set(kept[k].dia_ids) for k in keys_as_written if k in kept),
        in_conversations_as_written=in_as_written,
        variants=variants,
    )


def _evidence_shown(done: Ingested, found: Sequence[FoundExchange], evidence: set[str]) -> bool:
    """Whether a line the look-back returned is an evidence turn: by the message each line
    is, where the look-back says; else by the exchange it starts with."""
    for item in found:
        if any(evidence & {done.turn_of_message.get(pk or 0, "")} for pk in item.message_ids):
            return True
        if not item.message_ids and evidence & set(done.exchange_turns.get(item.message_id or 0, ())):
            return True
    return False


def _prompt(user: User, text: str) -> tuple[int, set[int], int, int]:
    """The question as the latest message of a new conversation, and the turn begun on it:
    the conversation, the memories in its prompt (whole or as their index line), the
    prompt's tokens and its memory block's."""
    chat = session_start(user=user)
    message = message_post(session=chat, text=text, client_id=None)
    begun = turn_begin(user_id=user.pk, message_id=message.pk, now=message.created_at)
    assert begun is not None and begun.conversation.memory is not None
    reply_stop(attempt=begun.attempt, partial_text="")
    memory = begun.conversation.memory
    included = {item.memory_id for item in memory.items if item.included and item.memory_id is not None}
    tokens = sum(estimate_tokens(m.get("content") or "") for m in begun.conversation.messages)
    return chat.pk, included, tokens, memory.tokens


def _memories_found(user: User, chat: int, text: str) -> list[str]:
    context = ToolContext(user=user, time_zone=user.time_zone, session_id=chat)
    result = json.loads(run_tool(context, "search_memories", json.dumps({"query": text, "limit": TOP})))
    return [m["key"] for m in result.get("memories", [])]


def _observations_by_memory(done: Ingested) -> dict[int, Observation]:
    # Keys are encrypted: the store is read once and matched by its decrypted keys.
    return {
        m.pk: done.observation_of_key[m.key]
        for m in memory_list_for_user(user=done.user)
        if m.key in done.observation_of_key
    }


def median_ms(asked: Sequence[Asked], step: str) -> float | None:
    values = [a.seconds[step] * 1000 for a in asked if step in a.seconds]
    return statistics.median(values) if values else None


def traps_passed_off(
    conversation: Conversation, done: Ingested, questions: Sequence[Question], look_back: LookBack
) -> tuple[int, int, int]:
    """Category 5: of the questions answered by B's words, how many look-backs returned one
    of those turns, and how often such a turn was presented as the person's. Returns
    (questions, returned B's evidence turn, presented as the person's)."""
    if not look_back.available:
        return len(questions), 0, 0
    turns = conversation.turns()
    returned = passed_off = 0
    for question in questions:
        theirs = [turns[d].text for d in question.evidence if turns[d].speaker == conversation.speaker_b]
        voiced = in_persons_voice(question.text, conversation.speaker_a, conversation.speaker_b)
        found = look_back.search(done.user, voiced, None, None)
        lines = [(who, text) for x in found for who, text in x.lines if any(_same_words(text, t) for t in theirs)]
        returned += bool(lines)
        passed_off += any(speaker == PERSON for speaker, _ in lines)
    return len(questions), returned, passed_off


def _same_words(line: str, turn: str) -> bool:
    # A result may cut a long turn short, or tidy its spacing: the same opening words are the turn.
    line, turn = " ".join(line.split()), " ".join(turn.split())
    if line == turn:
        return True
    return min(len(line), len(turn)) >= 20 and (line[:80] in turn or turn[:80] in line)
