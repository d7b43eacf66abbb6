"""The lifetime benchmark, shortened to two weeks of one persona: it runs through the real
app, every safety fact the person stated is in every prompt after it, and the same
persona and seed give the same figures."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.simulated_life.figures import figures
from bench.simulated_life.persona import PersonaError, load_persona
from bench.simulated_life.play import live
from coach.views import streams as reply_stream_views

PERSONAS = Path(__file__).resolve().parents[2] / "bench" / "personas"
RUNNER = PERSONAS / "runner.yaml"


def _value(name: str, rows: list[tuple[str, str, str]]) -> str:
    return next(value for figure, value, _ in rows if figure == name)


@pytest.mark.django_db(transaction=True)
def test_two_weeks_keep_every_safety_fact_in_every_later_prompt() -> None:
    life = live(load_persona(RUNNER), weeks=2, seed=1)
    out = figures(life)

    recall = re.fullmatch(r"(\S+)% \((\d+)/(\d+)\)", _value("safety recall", out.rows))
    assert recall is not None, out.rows
    # The knee (week 1) and the peanuts (week 2) were checked in later prompts, and held.
    assert int(recall.group(3)) > 0
    assert recall.group(1) == "100.0", out.evidence
    assert len(life.turns) == 6
    assert all(turn.answered for turn in life.turns)
    # What the model received after the knee was mentioned names it, in the memory block.
    knee_said = next(turn.at for turn in life.turns if "left knee" in turn.said)
    assert all("left knee" in prompt.notes for prompt in life.prompts if prompt.at > knee_said)
    assert _value("emails in quiet hours", out.rows) == "0"
    assert _value("turns answered", out.rows) == "6 of 6"


@pytest.mark.django_db(transaction=True)
def test_the_same_persona_and_seed_give_the_same_figures_however_slow_the_machine(
    monkeypatch: pytest.MonkeyPatch, settings
) -> None:
    persona = load_persona(RUNNER)
    first = figures(live(persona, weeks=2, seed=7))
    # As on a loaded machine, where a turn stays quiet for longer than a reader waits before
    # it asks the database what became of the message, and lasts long enough to beat: here
    # every wait is that long, and every turn beats many times.
    monkeypatch.setattr(reply_stream_views, "QUIET_SECONDS", 0.001)
    settings.COACH_TURN_HEARTBEAT_SECONDS = 0.001
    second = figures(live(persona, weeks=2, seed=7))

    assert first.values == second.values
    assert "wall time" not in first.values


def test_every_shipped_persona_is_in_the_format() -> None:
    shipped = sorted(PERSONAS.glob("*.yaml"))

    assert len(shipped) >= 3
    for path in shipped:
        persona = load_persona(path)
        assert persona.weeks, path
        assert any(fact.safety for steps in persona.weeks.values() for step in steps for fact in step.facts), path


def test_a_persona_out_of_format_is_refused_saying_where_and_why(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(
        "name: Someone\nstart: 2026-01-05\ntime_zone: Europe/London\nsmall_talk: [hi]\n"
        "weeks:\n  1:\n    - say: my knee hurts\n      facts: [{keep: forever, look_for: knee}]\n"
    )

    with pytest.raises(PersonaError, match=r"broken\.yaml: weeks\.1\[0\]\.facts\[0\]\.keep must be `safety` or `fact`"):
        load_persona(path)
