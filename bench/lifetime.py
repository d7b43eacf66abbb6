"""Six months in a day: a person played through the real app for weeks on a simulated
clock, and what months of coaching do to their memory and their inbox.

    bin/bench lifetime [--persona FILE ...] [--weeks 26] [--seed 1]

Each persona (bench/personas/*.yaml by default; the format is in bench/personas/README.md)
chats three times a week through the ASGI app with the offline coach over HTTP, while
beat's jobs run on the same clock and emails go to a real SMTP server. Printed per
persona, each with its target: safety recall (every safety fact in every prompt after it
was said), current facts after a change, the store's size and near-duplicates, prompt
tokens per turn beside sending the whole history, intentions checked in on once in their
lead window, emails (per kind, in quiet hours, after unsubscribing, alike), wall time and
queries per turn. The same persona and seed give the same figures, wall time aside.

A benchmark, not a test: it prints tables, and evidence for any figure off its target.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.setup import django_for_benchmarks

# Said once per request the test client makes: thousands of times over months.
warnings.filterwarnings("ignore", message="Django checks for ServeStatic are disabled")
django_for_benchmarks()

from bench.simulated_life.figures import figures, table  # noqa: E402
from bench.simulated_life.persona import PersonaError, load_persona  # noqa: E402
from bench.simulated_life.play import live  # noqa: E402

PERSONAS = Path(__file__).resolve().parent / "personas"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--persona", type=Path, action="append", help="a persona file; repeat for several (default: all shipped)"
    )
    parser.add_argument("--weeks", type=int, default=26)
    parser.add_argument("--seed", type=int, default=1, help="chooses session times and small talk")
    args = parser.parse_args()
    if args.weeks < 1:
        parser.error("--weeks must be 1 or more")
    paths = args.persona or sorted([*PERSONAS.glob("*.yaml"), *PERSONAS.glob("*.json")])
    try:
        personas = [load_persona(path) for path in paths]
    except PersonaError as error:
        parser.error(str(error))
    for persona in personas:
        print(f"living {args.weeks} weeks of {persona.name}...", flush=True)
        print(table(persona.name, args.weeks, args.seed, figures(live(persona, weeks=args.weeks, seed=args.seed))))
        print(flush=True)


if __name__ == "__main__":
    main()
