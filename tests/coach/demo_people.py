"""People of the demo's walk and the wordings of one correction, written from the facts and
the changes alone, before the code that reads them: nothing here is phrased for a rule.

Each person tells a few facts, asks five questions that need them and makes two
corrections; `uses` names what a reply must bring up (one word of each group), `stale`
what no reply may say once the correction is made.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Ask:
    """A message of the walk: what the reply must use (one word of each group)."""

    text: str
    uses: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class Correction:
    """A message that changes a kept fact: the memory's words before and after."""

    text: str
    stale: tuple[str, ...]
    now: tuple[str, ...] = ()


@dataclass(frozen=True)
class Person:
    name: str
    email: str
    facts: tuple[str, ...]
    # Questions and corrections in the order they are said, in one conversation after the facts.
    walk: tuple[Ask | Correction, ...] = field(default=())


CELLIST = Person(
    name="Mireille",
    email="mireille@example.com",
    facts=(
        "I play cello in a chamber orchestra and we rehearse on Tuesday and Thursday evenings.",
        "I have tendinitis in my right wrist, so no practice sessions longer than 40 minutes.",
        "I'm allergic to sesame.",
        "I have an audition for the national orchestra in October.",
    ),
    walk=(
        Ask("How should I structure my practice this week?", uses=(("wrist", "40 minutes"),)),
        Ask("Is it OK if I practise for two hours straight tomorrow?", uses=(("wrist", "40 minutes"),)),
        Correction(
            "The orchestra swapped our rehearsals to Wednesday evenings.",
            stale=("tuesday", "thursday"),
            now=("wednesday",),
        ),
        Ask("Any ideas for a quick lunch between rehearsals?", uses=(("sesame",),)),
        Correction(
            "The audition got pushed back to the first week of November.", stale=("october",), now=("november",)
        ),
        Ask("When is my audition again?", uses=(("november",),)),
        Ask("What should I work on before the audition?", uses=(("audition",),)),
    ),
)

SWIMMER = Person(
    name="Tomasz",
    email="tomasz@example.com",
    facts=(
        "I'm a baker, so I start work at 4am.",
        "I have type 1 diabetes and take insulin.",
        "I'm allergic to mustard.",
        "I'm training for a 3 km open-water swim across Lake Bled in August.",
    ),
    walk=(
        Ask("What should I eat before a long swim?", uses=(("diabetes", "insulin"), ("mustard",))),
        Ask("When's the best time of day for me to train?", uses=(("4am", "baker", "work"),)),
        Correction(
            "I've left the bakery \u2014 I drive a tram now, mostly afternoon shifts.",
            stale=("baker", "4am"),
            now=("tram",),
        ),
        Ask("Can you plan my swimming for the week?", uses=(("bled", "swim"),)),
        Ask("How long until my lake swim?", uses=(("august",),)),
        Correction("The Bled swim isn't happening, they cancelled it.", stale=("bled", "august")),
        Ask("Is it safe for me to do a hard interval session?", uses=(("diabetes", "insulin"),)),
    ),
)

GARDENER = Person(
    name="Priya",
    email="priya@example.com",
    facts=(
        "I had my left hip replaced last year, so no kneeling or deep squats.",
        "I'm coeliac.",
        "I volunteer at the library every Tuesday morning.",
        "My goal is to finish a family cookbook by Christmas.",
        "I walk with a hiking group on Saturdays.",
    ),
    walk=(
        Ask("Can you suggest some gardening I could do this weekend?", uses=(("hip", "kneel"),)),
        Ask("What could I bake for the other library volunteers?", uses=(("coeliac", "gluten"),)),
        Correction("The hiking group meets on Sundays these days.", stale=("saturday",), now=("sunday",)),
        Ask(
            "How should I split my week between the cookbook and everything else?",
            uses=(("cookbook",), ("library", "tuesday")),
        ),
        Ask("Is yoga a good idea for me?", uses=(("hip", "kneel"),)),
        Correction(
            "Forget the cookbook, I'm putting the family recipes on a blog instead.",
            stale=("cookbook",),
            now=("blog",),
        ),
        Ask("What's a good breakfast before a long walk?", uses=(("coeliac", "gluten"),)),
    ),
)

# The person of the issue that asked for this demo, whose replies failed 15 of 22 times.
CLIMBER = Person(
    name="Ines",
    email="ines@example.com",
    facts=(
        "I'm allergic to shellfish.",
        "I have an A2 pulley injury on my left ring finger, so no max hangs until the physio clears it.",
        "I'm going on a climbing trip to Kalymnos in May.",
        "I'm a pharmacist and I start work at 7am.",
    ),
    walk=(
        Ask("Can I do fingerboard hangs?", uses=(("hangs", "pulley", "finger"),)),
        Ask("Plan my training this week", uses=(("hangs", "pulley", "finger"), ("kalymnos",))),
        Correction("Actually the trip moved to June.", stale=("in may",), now=("june",)),
        Correction("I'm no longer a pharmacist, I teach chemistry now.", stale=("pharmacist",), now=("chemistry",)),
        Ask("What should I eat on the trip?", uses=(("shellfish",),)),
        Ask("When is my trip?", uses=(("june",),)),
        Ask("What time can I train on weekdays?", uses=(("7am", "chemistry", "teach"),)),
    ),
)

PEOPLE = (CELLIST, SWIMMER, GARDENER, CLIMBER)

# One correction, ten ways: the kept fact is that Tomasz is a baker who starts work at 4am;
# the change is that he has left the bakery for a job at a bank, in office hours.
JOB_FACT = "I'm a baker, so I start work at 4am."
JOB_CHANGE_WORDINGS = (
    "I don't work at the bakery anymore \u2014 I got a job at a bank, so it's normal office hours now.",
    "Quick update: I quit the bakery last week. Started at a bank on Monday, 9 to 5.",
    "No more 4am starts for me! I left the bakery and I'm working at a bank now.",
    "I've changed jobs: I'm at a bank these days, not the bakery.",
    "The bakery is behind me now, I took an office job at the bank.",
    "Just so you know, I'm not a baker any more. I work in a bank now.",
    "I handed in my notice at the bakery and moved to a bank job with regular hours.",
    "Since this month I work at a bank instead of the bakery.",
    "My early shifts at the bakery are over \u2014 new job at a bank, office hours.",
    "Update on work: bank job now, bakery's done.",
)
