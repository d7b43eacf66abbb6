"""The published figures of a lived life, each with its target, and the evidence for any
that missed it (which prompt, which week, what was or was not in it)."""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass, field
from datetime import datetime, time
from zoneinfo import ZoneInfo

import numpy as np
from django.conf import settings

from bench.simulated_life.persona import KEEP, RAISE, REPLACE, Fact
from bench.simulated_life.play import Life, Prompt

EVIDENCE_LINES = 3


@dataclass
class Figures:
    rows: list[tuple[str, str, str]] = field(default_factory=list)  # (figure, value, target)
    evidence: list[str] = field(default_factory=list)
    values: dict[str, object] = field(default_factory=dict)  # for comparing two runs

    def add(self, name: str, value: str, target: str = "", *, compare: bool = True) -> None:
        self.rows.append((name, value, target))
        if compare:
            self.values[name] = value


def figures(life: Life) -> Figures:
    out = Figures()
    _recall(life, out)
    _current(life, out)
    _store(life, out)
    _tokens(life, out)
    _intentions(life, out)
    _emails(life, out)
    answered = sum(turn.answered for turn in life.turns)
    small_talk = [turn for turn in life.turns if not any(fact.does != "nothing" for fact in turn.facts)]
    out.add("turns answered", f"{answered} of {len(life.turns)}", "all")
    out.add(
        "turns with no labelled fact that wrote a memory",
        f"{sum(turn.written > 0 for turn in small_talk)} of {len(small_talk)}",
        "report",
    )
    queries = [turn.queries for turn in life.turns]
    out.add("queries per turn p50 / max", f"{statistics.median(queries):.0f} / {max(queries)}", "report")
    out.add("wall time", f"{life.wall_seconds:.0f} s", "< 300 s", compare=False)
    return out


def _stated(life: Life) -> list[tuple[datetime, int, Fact]]:
    return [(turn.at, turn.week, fact) for turn in life.turns for fact in turn.facts]


def _prompts_after(life: Life, moment: datetime, until: datetime | None = None) -> list[Prompt]:
    return [prompt for prompt in life.prompts if prompt.at > moment and (until is None or prompt.at <= until)]


def _recall(life: Life, out: Figures) -> None:
    stated = _stated(life)
    for safety, name in ((True, "safety recall"), (False, "kept facts recall")):
        checks = hits = 0
        for at, week, fact in stated:
            if fact.does != KEEP or fact.safety != safety:
                continue
            needle = fact.look_for.lower()
            # Kept until the person changes it (a later `replace` naming it as the old value).
            until = min((when for when, _, later in stated if when > at and needle in _lower(later.old)), default=None)
            # A turn whose prompt carried no memory block at all misses every fact.
            blockless = [turn for turn in life.turns if turn.at > at and not turn.has_block]
            for prompt in _prompts_after(life, at, until):
                checks += 1
                hits += needle in prompt.notes
                if needle not in prompt.notes:
                    _evidence(
                        out,
                        f"{name}: “{fact.look_for}” (said in week {week}) missing from the {prompt.what} prompt "
                        f"of week {prompt.week} ({prompt.at:%Y-%m-%d %H:%M} UTC)",
                    )
            checks += len(blockless)
            for turn in blockless:
                _evidence(out, f"{name}: the turn of week {turn.week} had no memory block at all")
        out.add(name, _percent(hits, checks), "100%" if checks else "n/a")


def _current(life: Life, out: Figures) -> None:
    stated = [(at, week, fact) for at, week, fact in _stated(life) if fact.does == REPLACE]
    checks = hits = stale = in_history = 0
    for index, (at, week, fact) in enumerate(stated):
        # Until a later change makes this value the old one.
        until = min(
            (other_at for other_at, _, other in stated[index + 1 :] if fact.look_for.lower() in _lower(other.old)),
            default=None,
        )
        for prompt in _prompts_after(life, at, until):
            checks += 1
            new = fact.look_for.lower() in prompt.notes
            old = [value for value in fact.old if value.lower() in prompt.notes]
            hits += new and not old
            stale += bool(old)
            in_history += any(value.lower() in prompt.history for value in fact.old)
            if not new or old:
                what = f"old value “{old[0]}” still there" if old else f"new value “{fact.look_for}” missing"
                _evidence(
                    out,
                    f"current facts: change of week {week} ({fact.look_for}): {what} in the {prompt.what} "
                    f"prompt of week {prompt.week}",
                )
    out.add("current facts: new value, not the old", _percent(hits, checks), "100%" if checks else "n/a")
    out.add("prompts holding a stale value beside the new", str(stale), "0")
    out.add("prompts quoting the old value in a weekly episode or email", str(in_history), "report")


def _store(life: Life, out: Figures) -> None:
    most = max((memories for _, memories, _ in life.store), default=0)
    episodes = max((count for _, _, count in life.store), default=0)
    final = life.store[-1] if life.store else (0, 0, 0)
    out.add("memories / episodes, most at any week's end", f"{most} / {episodes}", "≤ 60 / ≤ 14")
    out.add("memories / episodes at the end", f"{final[1]} / {final[2]}", "report")
    notes = [m for m in life.memories if m["category"] != "episode" and m["embedding"] is not None]
    pairs = [
        (a, b)
        for a, b in itertools.combinations(notes, 2)
        if _cosine(a["embedding"], b["embedding"]) >= life.dedup_threshold
    ]
    out.add(f"near-duplicate pairs at the end (cosine ≥ {life.dedup_threshold:g})", str(len(pairs)), "report; aim 0")
    for a, b in pairs[:EVIDENCE_LINES]:
        _evidence(out, f"near-duplicates: “{a['summary']}” / “{b['summary']}”")
    twice = 0
    for _, week, fact in _stated(life):
        if fact.does in (KEEP, REPLACE):
            holders = [m for m in notes if fact.look_for.lower() in f"{m['summary']} {m['content']}".lower()]
            if len(holders) > 1:
                twice += 1
                _evidence(
                    out, f"held twice: “{fact.look_for}” (week {week}) is in {', '.join(m['key'] for m in holders)}"
                )
    out.add("stated facts held by more than one memory", str(twice), "report; aim 0")


def _tokens(life: Life, out: Figures) -> None:
    prompt = sorted(turn.prompt_tokens for turn in life.turns)
    whole = sorted(turn.whole_history_tokens for turn in life.turns)
    out.add("prompt tokens per turn p50 / p95 / max", _spread(prompt), "report")
    out.add("the whole history instead, p50 / p95 / max", _spread(whole), "report")
    block = max((p.block_tokens for p in life.prompts), default=0)
    out.add("memory block tokens, most / budget", f"{block} / {life.memory_budget}", "≤ budget")


def _intentions(life: Life, out: Figures) -> None:
    check_ins = [email for email in life.emails if email["kind"] == "check_in"]
    zone = ZoneInfo(life.persona.time_zone)
    expected = on_time = late = twice = unrecognised = not_emailable = 0
    for at, week, fact in _stated(life):
        if fact.does != RAISE or fact.due is None:
            continue
        ids = {
            m["pk"]
            for m in life.memories
            if m["tier"] == "prospective"
            and m["due_at"] is not None
            and m["due_at"].astimezone(zone).date() == fact.due
        }
        due = datetime.combine(fact.due, time(0), tzinfo=zone)
        sent = [email for email in check_ins if email["memory_id"] in ids]
        late += sum(email["sent_at"] >= due for email in sent)
        if not ids:
            unrecognised += 1
            _evidence(
                out,
                f"intentions: “{fact.look_for}” due {fact.due} (week {week}) was kept as no intention with that date",
            )
        window_start = max(due - life.lead, at)
        if due > life.end:
            continue
        if life.persona.email_frequency == "off" or (life.unsubscribed_at and life.unsubscribed_at <= window_start):
            not_emailable += 1
            continue
        expected += 1
        inside = [email for email in sent if window_start <= email["sent_at"] < due]
        on_time += len(inside) == 1 and len(sent) == 1
        twice += len(sent) > 1
        if len(inside) != 1 or len(sent) != 1:
            _evidence(
                out,
                f"intentions: “{fact.look_for}” due {fact.due}: {len(sent)} check-in(s), "
                f"{len(inside)} inside {window_start:%Y-%m-%d}..{fact.due}",
            )
    out.add(
        "intentions checked in once, inside the lead window", _percent(on_time, expected), "100%" if expected else "n/a"
    )
    out.add("intentions checked in twice / after their date", f"{twice} / {late}", "0 / 0")
    out.add("intentions not kept as dated ones / no email allowed", f"{unrecognised} / {not_emailable}", "report")


def _emails(life: Life, out: Figures) -> None:
    kinds = {
        kind: sum(email["kind"] == kind for email in life.emails) for kind in ("nudge", "check_in", "session_summary")
    }
    out.add(
        "emails sent: nudges / check-ins / recaps",
        f"{kinds['nudge']} / {kinds['check_in']} / {kinds['session_summary']} ({len(life.received)} arrived)",
        "report",
    )
    zone = ZoneInfo(life.persona.time_zone)
    quiet = [r for r in life.received if _in_quiet_hours(r.at.astimezone(zone).time(), life)]
    for received in quiet[:EVIDENCE_LINES]:
        _evidence(
            out, f"quiet hours: “{received.subject}” arrived {received.at.astimezone(zone):%a %Y-%m-%d %H:%M} local"
        )
    out.add("emails in quiet hours", str(len(quiet)), "0")
    window = (settings.EMAIL_SENDING_WINDOW_START, settings.EMAIL_SENDING_WINDOW_END)
    outside = [r for r in life.received if not window[0] <= r.at.astimezone(zone).hour < window[1]]
    out.add(f"emails outside sending hours ({window[0]}:00-{window[1]}:00)", str(len(outside)), "0")
    after = [r for r in life.received if life.unsubscribed_at and r.at > life.unsubscribed_at]
    for received in after[:EVIDENCE_LINES]:
        _evidence(out, f"after unsubscribing: “{received.subject}” arrived {received.at:%Y-%m-%d %H:%M} UTC")
    out.add("emails after unsubscribing", str(len(after)) if life.unsubscribed_at else "n/a (stayed)", "0")
    alike_skipped = sum("read like" in row["error"] for row in life.not_sent)
    out.add(
        "emails not sent: too like an earlier one / other",
        f"{alike_skipped} / {len(life.not_sent) - alike_skipped}",
        "report",
    )
    embedded = [email for email in life.emails if email["embedding"] is not None]
    alike = [
        (a, b)
        for a, b in itertools.combinations(embedded, 2)
        if _cosine(a["embedding"], b["embedding"]) > life.repeat_threshold
    ]
    for a, b in alike[:EVIDENCE_LINES]:
        _evidence(
            out,
            f"alike emails: {a['kind']} “{a['subject']}” of {a['sent_at']:%Y-%m-%d} and {b['kind']} "
            f"“{b['subject']}” of {b['sent_at']:%Y-%m-%d}, {len(_between(life, a, b))} emails sent between them",
        )
    out.add(f"email pairs above the repeat threshold ({life.repeat_threshold:g})", str(len(alike)), "0")


def _between(life: Life, first: dict, second: dict) -> list[dict]:
    return [email for email in life.emails if first["sent_at"] < email["sent_at"] < second["sent_at"]]


def _in_quiet_hours(moment: time, life: Life) -> bool:
    # Stated independently of emails/schedule.py: crossing midnight or not.
    start, end = life.persona.quiet_start, life.persona.quiet_end
    return start <= moment < end if start < end else moment >= start or moment < end


def _cosine(a: object, b: object) -> float:
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    norm = float(np.linalg.norm(x) * np.linalg.norm(y))
    return float(x @ y) / norm if norm else 0.0


def _spread(values: list[int]) -> str:
    if not values:
        return "n/a"
    p95 = values[max(0, round(len(values) * 0.95) - 1)]
    return f"{statistics.median(values):.0f} / {p95} / {values[-1]}"


def _percent(hits: int, checks: int) -> str:
    return f"{100 * hits / checks:.1f}% ({hits}/{checks})" if checks else "n/a"


def _lower(values: tuple[str, ...]) -> list[str]:
    return [value.lower() for value in values]


def _evidence(out: Figures, line: str) -> None:
    # The first few of each kind tell the story; thousands of lines would hide it.
    kind = line.split(":", 1)[0]
    if sum(existing.split(":", 1)[0] == kind for existing in out.evidence) < EVIDENCE_LINES:
        out.evidence.append(line)


def table(name: str, weeks: int, seed: int, out: Figures) -> str:
    lines = [f"### {name}: {weeks} weeks, seed {seed}", "", "| figure | value | target |", "|---|---:|---:|"]
    lines += [f"| {figure} | {value} | {target} |" for figure, value, target in out.rows]
    if out.evidence:
        lines += ["", "Where a figure missed:", *(f"- {line}" for line in out.evidence)]
    return "\n".join(lines)
